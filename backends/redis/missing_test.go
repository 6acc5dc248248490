package redisstream

import (
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
)

// TestMissingDLQ: a stream that does not exist is named after the URL,
// with the password redacted; an existing one says nothing.
func TestMissingDLQ(t *testing.T) {
	const password = "m1ssing-Pass-xyz"
	srv := redistest.Start(t, "--requirepass", password)
	url := "redis://:" + password + "@" + srv.Addr() + "/0?stream=orders-dlq"
	s := openStream(t, url, Options{})
	want := "redis://:xxxxx@" + srv.Addr() + `/0?stream=orders-dlq: stream "orders-dlq" does not exist`
	if got := s.MissingDLQ(); got != want {
		t.Errorf("MissingDLQ() = %q, want %q", got, want)
	}
	assertNoSecret(t, password, s.MissingDLQ())

	xadd(t, srv.Client(), "orders-dlq", "event_id", "E1", "payload", "{}")
	if got := openStream(t, url, Options{}).MissingDLQ(); got != "" {
		t.Errorf("MissingDLQ() of an existing stream = %q, want empty", got)
	}
}

// TestMissingDLQQuotesTheKey: a key with ":" and spaces stays one quoted
// name after the URL.
func TestMissingDLQQuotesTheKey(t *testing.T) {
	k := key(t, "dlq with space")
	s := openStream(t, shared.URL(0, k), Options{})
	if got := s.MissingDLQ(); !strings.HasSuffix(got, `: stream "`+k+`" does not exist`) {
		t.Errorf("MissingDLQ() = %q", got)
	}
}
