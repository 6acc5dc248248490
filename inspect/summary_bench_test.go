package inspect

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// sliceSource is a Source over envelopes in memory.
type sliceSource []envelope.Envelope

func (s sliceSource) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	for _, e := range s {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
func (s sliceSource) Get(context.Context, string) (envelope.Envelope, error) {
	return envelope.Envelope{}, nil
}
func (s sliceSource) Len(context.Context) (int64, error) { return int64(len(s)), nil }
func (s sliceSource) String() string                     { return "memory" }
func (s sliceSource) Close() error                       { return nil }

// BenchmarkSummarize: what stats costs per entry past reading it, on
// entries like a Spring dead-letter topic's (unique events, a handful of
// errors and origins).
func BenchmarkSummarize(b *testing.B) {
	const n = 100_000
	errs := []string{"timeout calling payments: context deadline exceeded", "customer record not found",
		"json: cannot unmarshal string into Go struct field Order.amount of type int", "upstream answered 503 Service Unavailable"}
	origins := []string{"orders", "payments", "shipments", "invoices", "notifications"}
	src := make(sliceSource, n)
	for i := range src {
		src[i] = envelope.Envelope{
			ID: fmt.Sprintf("%d:%d", i%4, i/4), EventID: fmt.Sprintf("evt-%08d", i), Fingerprint: fmt.Sprintf("sha256:%064x", i),
			LastError: errs[i%len(errs)], ErrorClass: "org.springframework.kafka.listener.ListenerExecutionFailedException",
			Origin:         envelope.Origin{Backend: "kafka", Topic: origins[i%len(origins)], Subscription: "workers"},
			DeadLetteredAt: now.Add(-time.Duration(i) * time.Second), Attempts: 3,
		}
	}
	w := Walker{Source: src, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now}
	b.ReportAllocs()
	for b.Loop() {
		s, err := w.Summarize(context.Background())
		if err != nil || s.Total != n {
			b.Fatal(s.Total, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
