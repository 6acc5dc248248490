package backendtest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// contractCall is a TestContract that runs the suite on the package's own
// registration.
var contractCall = regexp.MustCompile(`(?s)func TestContract\(t \*testing\.T\) \{.*?backendtest\.Suite\{\s*Registration:\s*(\w+\.)?Registration\(\),`)

// TestEveryBackendRunsTheContract: the suite lists no backend, so each
// registered backend must run it from a TestContract in its own
// directory — else a new backend would pass unchecked.
func TestEveryBackendRunsTheContract(t *testing.T) {
	root, err := testproc.FindScript("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range all.Registry().All() {
		files, err := filepath.Glob(filepath.Join(filepath.Dir(root), "backends", reg.Name, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if contractCall.Match(b) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("backend %s: no TestContract in backends/%s that runs backendtest.Suite{Registration: %s.Registration(), …}", reg.Name, reg.Name, reg.Name)
		}
	}
}
