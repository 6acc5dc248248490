package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/envelope"
)

// shared is one redis-server for the tests that need no special server
// options; each test uses its own stream keys.
var shared *redistest.Server

func TestMain(m *testing.M) {
	s, err := redistest.StartProcess()
	if err != nil {
		fmt.Fprintln(os.Stderr, "redisstream tests:", err)
		os.Exit(1)
	}
	shared = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "redisstream tests:", err)
	}
	os.Exit(code)
}

func openStream(t *testing.T, rawURL string, opts Options) *Stream {
	t.Helper()
	s, err := Open(context.Background(), rawURL, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", rawURL, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// key is a stream key of this test's own on the shared server.
func key(t *testing.T, suffix string) string {
	k := t.Name() + ":" + suffix
	shared.Client().Del(context.Background(), k)
	return k
}

func xadd(t *testing.T, rdb *redis.Client, stream string, fields ...string) string {
	t.Helper()
	id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, Values: fields}).Result()
	if err != nil {
		t.Fatalf("XADD %s: %v", stream, err)
	}
	return id
}

func scanAll(t *testing.T, s *Stream, after string) []envelope.Envelope {
	t.Helper()
	var out []envelope.Envelope
	if err := s.Scan(context.Background(), after, func(e envelope.Envelope) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

func ids(es []envelope.Envelope) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// xrangeCalls is how many XRANGE commands the server has run.
func xrangeCalls(t *testing.T) int {
	t.Helper()
	info, err := shared.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_xrange:calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

func TestScanOrderAndPaging(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	var want []string
	for i := range 10 {
		want = append(want, xadd(t, shared.Client(), k, "event_id", fmt.Sprintf("E%d", i), "payload", "{}"))
	}
	s := openStream(t, shared.URL(0, k), Options{PageSize: 3})

	before := xrangeCalls(t)
	got := scanAll(t, s, "")
	if !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("scan ids = %v, want %v", ids(got), want)
	}
	for i, e := range got {
		if e.EventID != fmt.Sprintf("E%d", i) || e.Malformed != "" {
			t.Errorf("entry %d: event_id %q malformed %q", i, e.EventID, e.Malformed)
		}
	}
	if calls := xrangeCalls(t) - before; calls != 4 {
		t.Errorf("scan of 10 entries with page size 3 ran %d XRANGE, want 4 (3+3+3+1)", calls)
	}

	if got := ids(scanAll(t, s, want[4])); !reflect.DeepEqual(got, want[5:]) {
		t.Errorf("scan after %s = %v, want %v", want[4], got, want[5:])
	}
	if got := scanAll(t, s, want[9]); len(got) != 0 {
		t.Errorf("scan after the last entry = %v, want none", ids(got))
	}

	n := 0
	err := s.Scan(ctx, "", func(envelope.Envelope) error {
		n++
		if n == 4 {
			return backend.ErrStop
		}
		return nil
	})
	if err != nil || n != 4 {
		t.Errorf("ErrStop at 4: err %v after %d entries, want nil after 4", err, n)
	}

	boom := errors.New("boom")
	if err := s.Scan(ctx, "", func(envelope.Envelope) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: Scan returned %v, want boom", err)
	}
	var ce *backend.ConfigError
	if err := s.Scan(ctx, "not-an-id", func(envelope.Envelope) error { return nil }); !errors.As(err, &ce) {
		t.Errorf("bad cursor: %v, want a ConfigError", err)
	}
}

func TestScanEmptyAndMissingStream(t *testing.T) {
	s := openStream(t, shared.URL(0, key(t, "none")), Options{})
	if got := scanAll(t, s, ""); len(got) != 0 {
		t.Errorf("missing stream scanned %d entries", len(got))
	}
	if n, err := s.Len(context.Background()); err != nil || n != 0 {
		t.Errorf("Len of a missing stream = %d, %v; want 0, nil", n, err)
	}
}

func TestDecodeAliasesAndProperties(t *testing.T) {
	k := key(t, "dlq")
	xadd(t, shared.Client(), k,
		"eventId", "E7", "payload", `{"a":1}`, "delivery_count", "4", "reason", "timeout calling payments",
		"category", "transient", "origin_stream", "orders", "origin_group", "workers", "origin_consumer", "w2",
		"dead_lettered_at", "2026-11-29T10:05:00Z", "tenant", "acme", "region", "eu")
	s := openStream(t, shared.URL(0, k), Options{})
	got := scanAll(t, s, "")
	if len(got) != 1 {
		t.Fatalf("got %d entries", len(got))
	}
	e := got[0]
	if e.Malformed != "" {
		t.Fatalf("malformed: %s", e.Malformed)
	}
	want := envelope.Origin{Backend: "redis", Topic: "orders", Subscription: "workers", Consumer: "w2"}
	if e.EventID != "E7" || e.Attempts != 4 || e.LastError != "timeout calling payments" || e.ErrorClass != "transient" || e.Origin != want {
		t.Errorf("aliases decoded to %+v", e)
	}
	if !e.DeadLetteredAt.Equal(time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)) {
		t.Errorf("dead_lettered_at = %v", e.DeadLetteredAt)
	}
	if !reflect.DeepEqual(e.Properties, map[string]string{"tenant": "acme", "region": "eu"}) {
		t.Errorf("properties = %v", e.Properties)
	}
	if e.PayloadEncoding != envelope.EncodingJSON || !e.FingerprintComputed || e.Fingerprint != envelope.ComputeFingerprint([]byte(`{"a":1}`)) {
		t.Errorf("payload %s, fingerprint %s computed %v", e.PayloadEncoding, e.Fingerprint, e.FingerprintComputed)
	}

	// Configured names replace the defaults for that field only.
	s2 := openStream(t, shared.URL(0, k), Options{Fields: envelope.FieldNames{envelope.FieldEventID: {"region"}}})
	if e := scanAll(t, s2, "")[0]; e.EventID != "eu" || e.Attempts != 4 || e.Properties["eventId"] != "E7" {
		t.Errorf("custom names: event_id %q attempts %d properties %v", e.EventID, e.Attempts, e.Properties)
	}
}

func TestMalformedIsListed(t *testing.T) {
	k := key(t, "dlq")
	first := xadd(t, shared.Client(), k, "event_id", "E1", "payload", "x")
	bad := xadd(t, shared.Client(), k, "payload", "y", "attempts", "five")
	last := xadd(t, shared.Client(), k, "event_id", "E3", "payload", "z")
	s := openStream(t, shared.URL(0, k), Options{})
	got := scanAll(t, s, "")
	if !reflect.DeepEqual(ids(got), []string{first, bad, last}) {
		t.Fatalf("ids = %v: a malformed entry must not be skipped", ids(got))
	}
	m := got[1]
	if m.Malformed == "" || !strings.Contains(m.Malformed, "attempts") {
		t.Errorf("malformed reason = %q, want it to name attempts", m.Malformed)
	}
	var raw map[string]string
	if err := json.Unmarshal(m.Raw, &raw); err != nil || raw["attempts"] != "five" || raw["payload"] != "y" {
		t.Errorf("raw = %s (%v)", m.Raw, err)
	}
	if got[0].Malformed != "" || got[2].Malformed != "" {
		t.Errorf("neighbours malformed: %q, %q", got[0].Malformed, got[2].Malformed)
	}
}

func TestGetAndLen(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	s := openStream(t, shared.URL(0, k), Options{})
	a := xadd(t, shared.Client(), k, "event_id", "A", "payload", "1")
	xadd(t, shared.Client(), k, "event_id", "B", "payload", "2")
	e, err := s.Get(ctx, a)
	if err != nil || e.EventID != "A" || e.ID != a {
		t.Fatalf("Get(%s) = %+v, %v", a, e, err)
	}
	for _, id := range []string{"1-1", "99999999999999-0", "abc", "", "1", "1-2-3", a + "x"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
	}
	if n, err := s.Len(ctx); err != nil || n != 2 {
		t.Errorf("Len = %d, %v; want 2", n, err)
	}
}

func TestContextCancelledMidScan(t *testing.T) {
	k := key(t, "dlq")
	pipe := shared.Client().Pipeline()
	for i := range 200 {
		pipe.XAdd(context.Background(), &redis.XAddArgs{Stream: k, Values: []string{"event_id", strconv.Itoa(i), "payload", "p"}})
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := openStream(t, shared.URL(0, k), Options{PageSize: 10})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	start := time.Now()
	err := s.Scan(ctx, "", func(envelope.Envelope) error {
		n++
		if n == 15 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan after cancel = %v, want context.Canceled", err)
	}
	if n != 15 {
		t.Errorf("fn ran %d times, want 15: the scan must stop at the next entry", n)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancelled scan took %s", d)
	}
	// Cancelled before it starts: no round trip at all.
	if err := s.Scan(ctx, "", func(envelope.Envelope) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan with a cancelled ctx = %v", err)
	}
}

func TestWrongTypeKey(t *testing.T) {
	ctx := context.Background()
	k := key(t, "str")
	shared.Client().Set(ctx, k, "hello", 0)
	_, err := Open(ctx, shared.URL(0, k), Options{})
	var ce *backend.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not a stream") {
		t.Fatalf("Open on a string key = %v, want a ConfigError saying it is not a stream", err)
	}

	// A key that changes type after Open.
	k2 := key(t, "later")
	s := openStream(t, shared.URL(0, k2), Options{})
	shared.Client().Set(ctx, k2, "x", 0)
	err = s.Scan(ctx, "", func(envelope.Envelope) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "not a stream") {
		t.Errorf("Scan of a string key = %v", err)
	}
	if _, err := s.Len(ctx); err == nil || !strings.Contains(err.Error(), "not a stream") {
		t.Errorf("Len of a string key = %v", err)
	}
}
