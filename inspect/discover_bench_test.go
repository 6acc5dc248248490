package inspect

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// BenchmarkDiscover: what `categorize --discover --all -o json` costs per
// entry past reading it, beside BenchmarkSummarize (what stats costs), on
// errors that carry an order ID each, so that every entry's error is a new
// string to mask and mine, the memo never helping.
func BenchmarkDiscover(b *testing.B) {
	const n = 100_000
	errs := []string{"timeout calling payments for order order-%d: context deadline exceeded", "customer %d record not found",
		"json: cannot unmarshal string into Go struct field Order.amount of type int (offset %d)", "upstream answered 503 Service Unavailable after %dms"}
	src := make(sliceSource, n)
	for i := range src {
		src[i] = envelope.Envelope{
			ID: fmt.Sprintf("%d:%d", i%4, i/4), EventID: fmt.Sprintf("evt-%08d", i), Fingerprint: fmt.Sprintf("sha256:%064x", i),
			LastError: fmt.Sprintf(errs[i%len(errs)], 10000+i), Origin: envelope.Origin{Backend: "kafka", Topic: "orders"},
			DeadLetteredAt: now.Add(-time.Duration(i) * time.Second), Attempts: 3,
		}
	}
	w := Walker{Source: src, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now}
	b.ReportAllocs()
	for b.Loop() {
		d, err := w.Discover(context.Background(), DiscoverOptions{KeepIDs: true})
		if err != nil || d.Total != n || len(d.Groups) != len(errs) {
			b.Fatal(d.Total, len(d.Groups), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
