package main

import (
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLeaveNothingUntracked: every file that the sh blocks of
// README.md and docs/runbook.md write into the folder they run in (a
// checkout: plans, their journals, exports, inboxes, the worker's ready
// file) is one that .gitignore lists, so that following the docs leaves
// git status clean. Absolute paths (/tmp/…) and variables are outside the
// checkout.
func TestDocsLeaveNothingUntracked(t *testing.T) {
	ignore := gitignorePatterns(t)
	written := regexp.MustCompile(`(?:--out|--ready|-o|--journal|--suggest-rules)[ =]([^\s;&|)]+)|sqlite:([^\s;&|)]+)`)
	for _, doc := range []string{"README.md", "docs/runbook.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "```sh\n")[1:] {
			block = block[:strings.Index(block, "```")]
			block = regexp.MustCompile(`\$\([^)]*\)`).ReplaceAllString(block, "1") // $(date +%s)
			for _, m := range written.FindAllStringSubmatch(block, -1) {
				p := m[1] + m[2]
				if p == "-" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "$") || strings.HasPrefix(p, "~") ||
					strings.HasPrefix(p, "json") || strings.HasPrefix(p, "markdown") || strings.ContainsAny(p, "…") {
					continue
				}
				files := []string{strings.Trim(p, `'"`)}
				if strings.HasSuffix(files[0], ".json") && strings.Contains(m[0], "--out") {
					files = append(files, strings.TrimSuffix(files[0], ".json")+".journal")
				}
				for _, f := range files {
					if !ignored(ignore, f) {
						t.Errorf("%s writes %s into the checkout, and .gitignore does not list it", doc, f)
					}
				}
			}
		}
	}
}

// gitignorePatterns are the patterns of the checkout's .gitignore.
func gitignorePatterns(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// ignored says whether a pattern matches the path p (relative to the
// checkout), as git reads the simple patterns .gitignore uses: "/x"
// anchored at the root, "x/" a folder and what is in it, "x" any name.
func ignored(patterns []string, p string) bool {
	p = path.Clean(p)
	for _, pat := range patterns {
		anchored := strings.HasPrefix(pat, "/")
		pat = strings.TrimPrefix(pat, "/")
		if dir, ok := strings.CutSuffix(pat, "/"); ok {
			if p == dir || strings.HasPrefix(p, dir+"/") {
				return true
			}
			continue
		}
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
		if ok, _ := path.Match(pat, path.Base(p)); ok && !anchored {
			return true
		}
	}
	return false
}
