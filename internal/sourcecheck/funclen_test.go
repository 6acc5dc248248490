package sourcecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxLines is how long a production function may be, from its func line
// to its closing brace, before its doc comment must say why.
const maxLines = 80

// longReason is how a doc comment says why: "It stays one function over
// 80 lines: it is the text of one Lua function, …".
var longReason = regexp.MustCompile(`over 80 lines: *\S`)

// TestLongFunctionsSayWhy: no function in a non-test file is over 80
// lines unless its doc comment gives the reason, so that a long function
// is a decision someone wrote down, not an accident.
func TestLongFunctionsSayWhy(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			lines := fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Pos()).Line + 1
			if lines > maxLines && (fd.Doc == nil || !longReason.MatchString(strings.Join(strings.Fields(fd.Doc.Text()), " "))) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: %s is %d lines: split it, or say in its doc comment why it stays one function (\"It stays one function over 80 lines: …\")",
					rel, fset.Position(fd.Pos()).Line, fd.Name.Name, lines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: not the module", files, root)
	}
}

// moduleRoot is the folder holding go.mod, above the test's own.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}
