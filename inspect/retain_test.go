package inspect

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/envelope/envelopetest"
)

// textSource makes each entry afresh on every scan, its event ID a slice
// of one large text, as a backend's decoder gives it (a Redis entry's
// fields are slices of the entry's text); its id is a string of its own,
// as backend.Source promises. Entries 2i and 2i+1
// share an event ID with different fingerprints: every event is in
// conflict.
type textSource struct{ n, size int }

func (s textSource) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	for i := range s.n {
		text := fmt.Sprintf("E%06d ", i/2) + strings.Repeat("x", s.size)
		e := envelope.Envelope{ID: fmt.Sprintf("%06d", i), EventID: text[:7], Fingerprint: fmt.Sprintf("sha256:%064x", i),
			LastError: "timeout", Origin: envelope.Origin{Topic: "orders"}, DeadLetteredAt: now}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
func (s textSource) Get(context.Context, string) (envelope.Envelope, error) {
	return envelope.Envelope{}, nil
}
func (s textSource) Len(context.Context) (int64, error) { return int64(s.n), nil }
func (s textSource) String() string                     { return "text" }
func (s textSource) Close() error                       { return nil }

// TestSummaryKeepsCopiesOfConflicts: the summary lists every event ID in
// conflict; what it keeps is the ID, not the entry it came from.
func TestSummaryKeepsCopiesOfConflicts(t *testing.T) {
	const entries, size = 400, 64 << 10
	w := Walker{Source: textSource{entries, size}, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now.Add(time.Hour)}
	var err error
	s, grew := envelopetest.Retained(func() Summary {
		s, e := w.Summarize(context.Background())
		err = e
		return s
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Conflicts) != entries/2 || s.Conflicts[0] != "E000000" {
		t.Fatalf("%d conflicts (first %q), want %d", len(s.Conflicts), s.Conflicts[0], entries/2)
	}
	if grew > 1<<20 {
		t.Errorf("a summary of %d conflicts keeps %d bytes on the heap; the entries' %d-byte texts stayed with it", len(s.Conflicts), grew, size)
	}
}
