package dirqueue_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dirqueue "github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
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
		}, HolderKeepsLease: "the lease is an flock, which lives with the holder's process", Refuse: func(t *testing.T, fx conformance.Fixture, _, entryID string) {
			// The inbox holds a file of the entry's name: a move never
			// replaces one.
			inbox := filepath.Join(rootOf(fx), "inbox")
			if err := os.WriteFile(filepath.Join(inbox, entryID+".json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
			Held: func(t *testing.T, fx conformance.Fixture) int {
				files, err := filepath.Glob(filepath.Join(rootOf(fx), "error", "*.json"))
				if err != nil {
					t.Fatal(err)
				}
				return len(files)
			},
			Recreate: func(t *testing.T, fx conformance.Fixture) {
				dlq := filepath.Join(rootOf(fx), "error")
				if err := os.RemoveAll(dlq); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(dlq, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
				// Every file of the queue (DLQ, inbox, lease) with its mode,
				// time and content.
				root := rootOf(fx)
				var lines []string
				err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					fi, err := d.Info()
					if err != nil {
						return err
					}
					raw, err := os.ReadFile(path)
					if err != nil {
						return err
					}
					rel, _ := filepath.Rel(root, path)
					lines = append(lines, fmt.Sprintf("%s %v %x", rel, fi.Mode(), sha256.Sum256(raw)))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return lines
			},
			Native: func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
				// One file's bytes under as many names: a file name is the
				// entry's locator and nothing inside tells the copies apart.
				raw, err := dirqueue.MarshalFile(e)
				if err != nil {
					t.Fatal(err)
				}
				dlq := filepath.Join(rootOf(fx), "error")
				for _, d := range []string{dlq, filepath.Join(rootOf(fx), "inbox")} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				for k := 1; copies > 0; k++ {
					f, err := os.OpenFile(filepath.Join(dlq, fmt.Sprintf("%s-%d.json", e.EventID, k)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
					if errors.Is(err, fs.ErrExist) {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					_, err = f.Write(raw)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					if err != nil {
						t.Fatal(err)
					}
					copies--
				}
			},
			NotApplicable: map[string]string{
				"broker-crash":            "no server: the DLQ is a folder, and a move is a rename in it",
				"conn-drop":               "no connection: a move is a rename in a local folder",
				"read-only-limited":       "no delivery count: a read opens files",
				"two-pointers":            "an entry is a file holding its dead letter whole",
				"forged-record":           "no record of removals: a move takes the file itself out",
				"bookkeeping-destination": "nothing of dlqctl's is a destination: its lease is a file beside the DLQ folder, and a destination is a folder",
			},
		}
	})
}

func rootOf(fx conformance.Fixture) string { return strings.TrimPrefix(fx.Source, "dir:") }
