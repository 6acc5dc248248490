package dirqueue_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	dirqueue "github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/conformance"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(dirqueue.Registration())

// TestConformance runs the shared conformance suite on the directory queue, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		return &conformance.Target{Fresh: func(t *testing.T) conformance.Fixture {
			root := filepath.Join(t.TempDir(), "q")
			return conformance.Fixture{Source: "dir:" + root, Origin: "orders", Consume: []string{"--source", "dir:" + root},
				ImportFlags: []string{"--init"}, Self: filepath.Join(root, "error"), Alias: "dir:" + root + "/."}
		}, Refuse: func(t *testing.T, fx conformance.Fixture, _, entryID string) {
			// The inbox holds a file of the entry's name: a move never
			// replaces one.
			inbox := filepath.Join(strings.TrimPrefix(fx.Source, "dir:"), "inbox")
			if err := os.WriteFile(filepath.Join(inbox, entryID+".json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}}
	})
}
