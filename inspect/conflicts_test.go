package inspect

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
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
	q := emptyDirQueue(t)
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

// shortFirstScan is a source whose first scan misses its first skip
// entries, as an SQS receive whose answer was lost does: they are back
// for the next scan.
type shortFirstScan struct {
	backend.Source
	skip, scans int
}

func (s *shortFirstScan) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	s.scans++
	seen := 0
	return s.Source.Scan(ctx, after, func(e envelope.Envelope) error {
		if seen++; s.scans == 1 && seen <= s.skip {
			return nil
		}
		return fn(e)
	})
}

// TestSummarizeCountsOnePass: with conflicts, stats reads the DLQ twice and
// counts the second pass; the unique events are counted over that pass
// too, so that they agree with the total when the first read fell short.
func TestSummarizeCountsOnePass(t *testing.T) {
	ctx := context.Background()
	q := emptyDirQueue(t)
	for i, ev := range []struct{ id, fp string }{{"A", "sha256:01"}, {"B", "sha256:02"}, {"C", "sha256:03"}, {"D", "sha256:04"}, {"D", "sha256:05"}} {
		e := envelope.Envelope{ID: fmt.Sprintf("%06d", i), EventID: ev.id, Fingerprint: ev.fp, LastError: "timeout",
			DeadLetteredAt: now.Add(-time.Hour), Payload: []byte(`{}`), PayloadEncoding: "json"}
		if _, err := q.Import(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	src := &shortFirstScan{Source: q, skip: 2}
	s, err := Walker{Source: src, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now}.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src.scans != 2 || s.Total != 5 || s.UniqueEvents != 4 {
		t.Errorf("%d scans, total %d, unique %d; want 2 scans, total 5 and 4 unique events (A B C D)", src.scans, s.Total, s.UniqueEvents)
	}
}

// emptyDirQueue is a new, empty directory queue.
func emptyDirQueue(t *testing.T) *dirqueue.Queue {
	t.Helper()
	root := t.TempDir()
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	q, err := dirqueue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
