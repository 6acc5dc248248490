package dirqueue

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMissingDLQ: a queue opened without its error/ folder names that
// folder; one with it says nothing.
func TestMissingDLQ(t *testing.T) {
	root := t.TempDir()
	q, err := OpenAllowMissing(root)
	if err != nil {
		t.Fatal(err)
	}
	want := "dir:" + root + ": folder " + filepath.Join(root, "error") + " does not exist"
	if got := q.MissingDLQ(); got != want {
		t.Errorf("MissingDLQ() = %q, want %q", got, want)
	}
	if err := os.Mkdir(filepath.Join(root, "error"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, open := range []func(string) (*Queue, error){Open, OpenAllowMissing} {
		q, err := open(root)
		if err != nil {
			t.Fatal(err)
		}
		if got := q.MissingDLQ(); got != "" {
			t.Errorf("MissingDLQ() of an existing folder = %q, want empty", got)
		}
	}
}
