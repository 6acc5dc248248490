package inspect

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/envelope"
)

// TestSummarizeConflictSemantics pins what stats counts as a conflict,
// through a real directory queue: the same event ID with two fingerprints is
// a conflict (every entry of it, wherever it sits in the DLQ), the same
// event ID with one fingerprint is a duplicate and not a conflict, distinct
// events are never in conflict, and fingerprints differ by value, not by
// letter case.
func TestSummarizeConflictSemantics(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	q, err := dirqueue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	add := func(i int, eventID, fp string) {
		t.Helper()
		e := envelope.Envelope{
			ID: fmt.Sprintf("%06d", i), EventID: eventID, Fingerprint: fp, LastError: "timeout",
			DeadLetteredAt: now.Add(-time.Hour), Payload: []byte(`{}`), PayloadEncoding: "json",
		}
		if _, err := q.Import(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	const distinct = 100
	i := 0
	add(i, "conflict-first-last", "sha256:01")
	for ; i < distinct; i++ {
		add(i+1, fmt.Sprintf("E%d", i), fmt.Sprintf("sha256:%04x", i))
	}
	add(i+1, "dup", "sha256:aa")
	add(i+2, "dup", "sha256:aa")
	add(i+3, "case", "sha256:ABCD")
	add(i+4, "case", "sha256:abcd")
	add(i+5, "pair", "sha256:01")
	add(i+6, "pair", "sha256:02")
	add(i+7, "conflict-first-last", "sha256:02")
	s, err := Walker{Source: q, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now}.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"conflict-first-last", "pair"}; !slices.Equal(s.Conflicts, want) {
		t.Errorf("conflicts %v, want %v", s.Conflicts, want)
	}
	if got := s.ByCategory[envelope.CategoryConflict]; got != 4 {
		t.Errorf("%d entries in category conflict, want 4 (both entries of each conflicting event)", got)
	}
	if want := distinct + 4; s.UniqueEvents != want || s.Total != distinct+8 {
		t.Errorf("unique %d total %d, want %d and %d", s.UniqueEvents, s.Total, want, distinct+8)
	}
}
