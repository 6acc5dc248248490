package natsdlq

import (
	"context"
	"testing"
)

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"dlq.S.>", "dlq.S.orders", true},
		{"dlq.S.>", "dlq.S.a.b", true},
		{"dlq.S.>", "dlq.S", false},
		{"orders.*", "orders.eu", true},
		{"orders.*", "orders.eu.x", false},
		{"orders", "orders", true},
		{"orders", "orders.eu", false},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
	} {
		if got := subjectMatches(c.pattern, c.subject); got != c.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
}

// Without a stream read yet, the guard holds the subjects a copy stream
// that import --init makes would take.
func TestGuardDestination(t *testing.T) {
	s := &Stream{src: sourceURL{stream: "ORDERS_DLQ"}}
	for dest, refused := range map[string]bool{
		"orders.created":           false,
		"dlq.ORDERS_DLQ.orders":    true,
		"$KV.dlqctl_leases.ORDERS": true,
		"$JS.API.STREAM.DELETE.X":  true,
		"_INBOX.abc":               true,
		"orders.*":                 true,
		"":                         true,
	} {
		err := s.GuardDestination(context.Background(), dest)
		if (err != nil) != refused {
			t.Errorf("GuardDestination(%q) = %v, want refused %v", dest, err, refused)
		}
	}
}
