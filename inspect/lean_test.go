package inspect

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/envelope"
)

// leanQueue is a directory queue that can also scan lean, counting which
// way it was read; its lean envelopes lack what backend.LeanScanner says
// they may.
type leanQueue struct {
	*dirqueue.Queue
	scans, leans int
}

func (q *leanQueue) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	q.scans++
	return q.Queue.Scan(ctx, after, fn)
}

func (q *leanQueue) ScanLean(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	q.leans++
	return q.Queue.Scan(ctx, after, func(e envelope.Envelope) error {
		e.Properties, e.PayloadEncoding, e.Raw = nil, "", nil
		return fn(e)
	})
}

var _ backend.LeanScanner = (*leanQueue)(nil)

// TestSummaryScansLeanUnlessARuleReadsProperties: stats reads a source
// lean when it can, with the same summary; a rule on properties makes it
// read whole envelopes, and the rule still matches.
func TestSummaryScansLeanUnlessARuleReadsProperties(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	dq, err := dirqueue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		tenant := "acme"
		if i%4 == 0 {
			tenant = "globex"
		}
		e := envelope.Envelope{
			ID: fmt.Sprintf("%03d", i), EventID: fmt.Sprintf("E%d", i), LastError: "timeout calling payments",
			DeadLetteredAt: now.Add(-time.Duration(i) * time.Minute), Payload: []byte(`{}`), PayloadEncoding: "json",
			Properties: map[string]string{"tenant": tenant},
		}
		if _, err := dq.Import(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	plain := Walker{Source: dq, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now}
	want, err := plain.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := &leanQueue{Queue: dq}
	got, err := Walker{Source: q, Classifier: plain.Classifier, Now: now}.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.leans != 1 || q.scans != 0 {
		t.Fatalf("default rules: %d lean and %d whole scans, want 1 and 0", q.leans, q.scans)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lean summary differs:\n got %+v\nwant %+v", got, want)
	}
	if _, err := (Walker{Source: q, Classifier: plain.Classifier, Now: now}).Conflicts(ctx); err != nil || q.leans != 2 {
		t.Fatalf("conflicts: %d lean scans (want 2), %v", q.leans, err)
	}

	rules := append([]envelope.Rule{{Name: "globex", Disposition: envelope.DispositionInvestigate,
		Properties: map[string]string{"tenant": "globex"}, Source: "test"}}, envelope.DefaultRules()...)
	q = &leanQueue{Queue: dq}
	s, err := Walker{Source: q, Classifier: envelope.NewClassifier(rules), Now: now}.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.leans != 0 || q.scans != 1 {
		t.Fatalf("a rule on properties: %d lean and %d whole scans, want 0 and 1", q.leans, q.scans)
	}
	if s.ByCategory["globex"] != 5 {
		t.Fatalf("globex %d, want 5 (categories %v)", s.ByCategory["globex"], s.ByCategory)
	}
}
