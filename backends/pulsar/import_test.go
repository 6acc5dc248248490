package pulsardlq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	dirqueue "github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/envelope"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// dlqctl runs one command line in-process and returns stdout, stderr and
// the exit code.
func dlqctl(t *testing.T, env map[string]string, stdin []byte, args ...string) ([]byte, []byte, int) {
	t.Helper()
	io, in, out, errOut := cmd.TestIO()
	in.Write(stdin)
	f := &cmd.Factory{Deps: cmd.Deps{Backends: backend.NewRegistry(dirqueue.Registration(), pulsardlq.Registration()), IO: io, Now: func() time.Time { return now }, Getenv: func(k string) string { return env[k] }}}
	code := cmd.Execute(context.Background(), f, args)
	return out.Bytes(), errOut.Bytes(), code
}

func mustDlqctl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	out, errOut, code := dlqctl(t, nil, stdin, args...)
	if code != 0 {
		t.Fatalf("dlqctl %v: exit %d\n%s", args, code, errOut)
	}
	return out
}

// TestIncidentImportIsRefusedTwice imports the sample incident (the shared
// conformance suite compares what it reads back on every backend) and
// checks what is Pulsar's own: a second import is refused whole, and stats
// reports the DLQ subscription's backlog.
func TestIncidentImportIsRefusedTwice(t *testing.T) {
	incident, err := filepath.Abs("../../testdata/incident")
	if err != nil {
		t.Fatal(err)
	}
	export := mustDlqctl(t, nil, "--source", "dir:"+incident, "export")
	src := sourceURL(t, freshTopic(t, ""))
	mustDlqctl(t, export, "--source", src, "import")
	_, errOut, code := dlqctl(t, nil, export, "--source", src, "import")
	if code == 0 || !bytes.Contains(errOut, []byte("already")) {
		t.Errorf("second import: exit %d, %s", code, errOut)
	}
	var stats map[string]any
	if err := json.Unmarshal(mustDlqctl(t, nil, "--source", src, "stats", "-o", "json"), &stats); err != nil {
		t.Fatal(err)
	}
	if stats["total"] != float64(284) {
		t.Errorf("total after a refused import = %v", stats["total"])
	}
	if b, ok := stats["backend"].(map[string]any); !ok || b["backlog"] != float64(284) || b["subscription"] != "dlqctl" {
		t.Errorf("stats backend = %v", stats["backend"])
	}
}

func TestImportRoundTrip(t *testing.T) {
	tp := open(t, freshTopic(t, ""), pulsardlq.Options{})
	ctx := testCtx(t)
	e := envelope.Envelope{
		ID: "20261129T080820Z-0002", EventID: "E42", Fingerprint: "md5:abc", PayloadVersion: "3",
		ContentType: "application/json", Key: "order-123",
		Origin:          envelope.Origin{Backend: "dir", Topic: "orders", Subscription: "order-workers", Consumer: "worker-2"},
		FirstReceivedAt: now.Add(-time.Hour), DeadLetteredAt: now.Add(-30 * time.Minute), Attempts: 5,
		LastError: "timeout", ErrorClass: "transient", Owner: "team-payments", RecoverBy: now.Add(time.Hour),
		SchemaInfo: "orders.v3", RedriveCount: 2,
		Properties: map[string]string{
			"tenant": "acme", pulsardlq.PropOrderingKey: "customer-9", pulsardlq.PropEventTime: "2026-11-29T10:00:00.5Z",
			"eventId": "shadow", "reason": "an alias of last_error",
		},
		PayloadEncoding: envelope.EncodingBase64, Payload: []byte("abc"),
	}
	id, err := tp.Import(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tp.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := e
	want.ID = id
	want.Origin.Backend = "pulsar"
	want.Properties = map[string]string{
		"tenant": "acme", pulsardlq.PropOrderingKey: "customer-9", pulsardlq.PropEventTime: "2026-11-29T10:00:00.5Z",
		"eventId": "shadow", "reason": "an alias of last_error", pulsardlq.SourceIDProperty: e.ID,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if has, err := tp.Has(ctx, e.ID); err != nil || !has {
		t.Errorf("has %s = %v, %v", e.ID, has, err)
	}
	if has, err := tp.Has(ctx, id); err != nil || !has {
		t.Errorf("has %s (its own id) = %v, %v", id, has, err)
	}
	if has, err := tp.Has(ctx, "other"); err != nil || has {
		t.Errorf("has other = %v, %v", has, err)
	}
	if _, err := tp.Import(ctx, e); !errors.Is(err, backend.ErrExists) {
		t.Errorf("import again: %v, want ErrExists", err)
	}
	// A fresh Topic finds the imported id by its scan.
	again := open(t, tp.TopicName(), pulsardlq.Options{})
	if has, err := again.Has(ctx, e.ID); err != nil || !has {
		t.Errorf("has after reopening = %v, %v", has, err)
	}
}
