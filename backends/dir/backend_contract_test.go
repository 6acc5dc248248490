package dirqueue_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backend/backendtest"
	dirqueue "github.com/dlqctl/dlqctl/backends/dir"
)

// TestContract runs the per-item contract on the directory queue: no
// server, a few seconds.
func TestContract(t *testing.T) {
	backendtest.Suite{
		Registration: dirqueue.Registration(),
		Fresh: func(t *testing.T) backendtest.Fixture {
			root := filepath.Join(t.TempDir(), "q")
			if err := dirqueue.Init(root); err != nil {
				t.Fatal(err)
			}
			return backendtest.Fixture{Source: "dir:" + root, Dest: filepath.Join(root, "inbox")}
		},
		// An flock: the kernel frees it when the holder's process dies,
		// which closing its file does here.
		Lease: backendtest.LeaseBehaviour{Crash: func(t *testing.T, l backend.Lease) {
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	}.Run(t)
}
