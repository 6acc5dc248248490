package natsdlq

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backends/nats/natstest"
)

// One server for the package, started by the first test that needs it
// (never under -short) and stopped after the last.
// shared is the one nats-server of this test binary, started by the
// first test that needs it (server); tests keep apart by stream name. The
// tests that need no server (decoders, URLs) run without one, in the
// -short tier too.
var shared = natstest.Shared()

func TestMain(m *testing.M) {
	os.Exit(shared.Finish(m.Run(), os.Stderr))
}

// server is the package's nats-server for a test that needs one: it skips
// the test under -short and fails it when the server cannot start.
func server(t *testing.T) *natstest.Server {
	t.Helper()
	return shared.Get(t)
}

// fresh makes a copy stream and an origin stream with names unique to the
// test, and returns the DLQ source URL and a client.
func fresh(t *testing.T) (url, dlq, origin string, js jetstream.JetStream) {
	t.Helper()
	srv := server(t)
	_, js = srv.JetStream(t)
	base := fmt.Sprintf("T%d", time.Now().UnixNano())
	dlq, origin = base+"_DLQ", base+"_ORDERS"
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: CopySubjects(dlq), AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: origin, Subjects: []string{origin + ".>"}}); err != nil {
		t.Fatal(err)
	}
	return srv.URL() + "?stream=" + dlq, dlq, origin, js
}

func open(t *testing.T, url string) *Stream {
	t.Helper()
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// deadLetter publishes a copy as a consumer would: the original's headers,
// the envelope fields, and a Nats-Msg-Id of its own.
func deadLetter(t *testing.T, js jetstream.JetStream, dlq string, m *nats.Msg, lastError string, n int) uint64 {
	t.Helper()
	h := nats.Header{}
	for k, vs := range m.Header {
		h[k] = vs
	}
	if h.Get("event_id") == "" {
		h.Set("event_id", m.Header.Get(nats.MsgIdHdr))
	}
	h.Set(HeaderOriginalSubject, m.Subject)
	h.Set("last_error", lastError)
	h.Set("attempts", "3")
	h.Set(nats.MsgIdHdr, fmt.Sprintf("%s-dead-%d", h.Get("event_id"), n))
	ack, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "dlq." + dlq + ".x", Header: h, Data: m.Data})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
