package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// TestEveryBackendRunsTheSuite: the suite lists no backend, so each
// registered backend must make its suite (For, with its Registration, in a
// package-level variable, which also makes the test binary dlqctl in the
// crash cases' child processes) and run it from its own directory's
// conformance_test.go — else a new backend would pass untested. A test
// may wrap its Registration in testRegistration (SQS shortens one case's
// visibility timeout through it).
func TestEveryBackendRunsTheSuite(t *testing.T) {
	root, err := testproc.FindScript("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range all.Registry().All() {
		path := filepath.Join(filepath.Dir(root), "backends", reg.Name, "conformance_test.go")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("backend %s: %v (its conformance_test.go must call conformance.Run)", reg.Name, err)
			continue
		}
		if !regexp.MustCompile(`(?m)^var \w+ = conformance\.For\((\w+\.Registration|testRegistration)\(\)\)$`).Match(b) || !strings.Contains(string(b), ".Run(t, func(t *testing.T) *conformance.Target {") {
			t.Errorf("backend %s: %s does not make its suite at package level (var suite = conformance.For(PKG.Registration())) and run it (suite.Run(t, …))", reg.Name, path)
		}
	}
}

// TestNotInTheBinary: the suite (and the test servers it reaches) is for
// tests only; dlqctl itself must not link it.
func TestNotInTheBinary(t *testing.T) {
	root, err := testproc.FindScript("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("go", "list", "-deps", ".")
	c.Dir = filepath.Dir(root)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/dlqctl/dlqctl/conformance" || strings.HasSuffix(p, "test") && strings.HasPrefix(p, "github.com/dlqctl/dlqctl/") {
			t.Errorf("the dlqctl binary links %s", p)
		}
	}
}
