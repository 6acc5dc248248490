package natsdlq_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/workertest"
)

// dlqctl runs one command line in-process and returns its exit code and
// output.
func dlqctl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	io, _, out, errOut := cmd.TestIO()
	f := &cmd.Factory{Deps: cmd.Deps{Backends: backend.NewRegistry(natsdlq.Registration()), IO: io, Now: time.Now, Getenv: func(string) string { return "" }}}
	code := cmd.Execute(context.Background(), f, args)
	return code, out.String() + errOut.String()
}

// TestEndToEndCopies: messages a real consumer gave up on become
// dead-letter copies, dlqctl lists them and redrives them, and the
// consumer then applies each once, under the event ID its producer gave
// (Nats-Msg-Id, inside the original publish's duplicate window).
func TestEndToEndCopies(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir()) // the one-step redrive writes its plan and journal here
	_, js := srv.JetStream(t)
	ctx := context.Background()
	base := fmt.Sprintf("e2e%d", time.Now().UnixNano())
	dlq, origin := base+"_DLQ", base+"_ORDERS"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: origin, Subjects: []string{base + ".orders"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		m := &nats.Msg{Subject: base + ".orders", Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("E%d", i)}}, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	inbox := filepath.Join(t.TempDir(), "inbox.db")
	consume := []string{"--source", srv.URL() + "?stream=" + origin + "&consumer=workers", "--dlq", dlq, "--inbox", "sqlite:" + inbox}
	w := workertest.Start(t, append(append([]string{}, consume...), "--fail", "E2", "--fail", "E5", "--fail-error", "timeout calling payments", "--until-idle", "2s")...)
	if err := w.Wait(); err != nil {
		t.Fatalf("worker: %v\n%s", err, w.Output())
	}
	source := srv.URL() + "?stream=" + dlq
	code, out := dlqctl(t, "--source", source, "list", "-o", "json")
	if code != 0 || !strings.Contains(out, `"E2"`) || !strings.Contains(out, `"E5"`) || strings.Contains(out, `"E1"`) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	w = workertest.Start(t, consume...)
	code, out = dlqctl(t, "--source", source, "redrive", "--yes", "--reason", "e2e", "--effects", "sqlite:"+inbox,
		"--settle", "20s", "--rate", "0", "--ramp", "10")
	if code != 0 {
		t.Fatalf("redrive: exit %d\n%s", code, out)
	}
	w.Stop()
	_ = w.Wait()
	rows := workertest.ReadInbox(t, inbox)
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("E%d", i)
		if rows[id].Effects != 1 {
			t.Errorf("%s: %d effects, want 1 (%+v)", id, rows[id].Effects, rows[id])
		}
	}
	if code, out := dlqctl(t, "--source", source, "stats", "-o", "json"); code != 0 || !strings.Contains(out, `"total": 0`) {
		t.Errorf("stats after the redrive: exit %d\n%s", code, out)
	}
}
