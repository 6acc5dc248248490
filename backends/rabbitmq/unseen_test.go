package rabbitmq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
)

// holdAll consumes every message of queue on a connection of its own and
// holds them unacknowledged (another dlqctl scan, or an application that
// consumes the DLQ); release gives them back.
func holdAll(t *testing.T, srv *rabbitmqtest.Server, queue string, n int) (release func()) {
	t.Helper()
	c, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case <-ds:
		case <-time.After(10 * time.Second):
			t.Fatal("the holder got fewer messages than the queue holds")
		}
	}
	released := false
	release = func() {
		if !released {
			released = true
			c.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// TestMessagesHeldByAnotherConsumer: while another consumer holds every
// message of the DLQ unacknowledged, a read cannot see them. It must never
// report the DLQ as empty: without the management API it fails saying
// why; with it, stats says how many it could not see and check
// --max-total 0 counts them. A redrive started meanwhile waits for them
// instead of calling its entries gone.
func TestMessagesHeldByAnotherConsumer(t *testing.T) {
	srv := broker.Get(t)
	base := uniq(t)
	ctx := context.Background()
	if err := rabbitmqtest.DeclareDLX(ctx, srv.Channel(t), base+"-orders", base+"-dlq", false, 0); err != nil {
		t.Fatal(err)
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E1", "E2", "E3", "E4", "E5")
	dir := t.TempDir()
	plain := strings.TrimSuffix(srv.URL(), "/") + "/?queue=" + base + "-dlq&timeout=2s"
	admin := srv.Source(base+"-dlq") + "&timeout=2s"
	planApproved(t, dir, srv.Source(base+"-dlq"))

	release := holdAll(t, srv, base+"-dlq", 5)
	if code, out := run(t, dir, "--source", plain, "stats"); code == 0 || !strings.Contains(out, "other consumer") {
		t.Errorf("stats without admin= while another consumer holds the DLQ: exit %d, want a failure naming it\n%s", code, out)
	}
	if code, out := run(t, dir, "--source", plain, "check", "--max-total", "0"); code == 0 {
		t.Errorf("check --max-total 0 passed on a DLQ of five held by another consumer\n%s", out)
	}
	time.Sleep(2 * time.Second) // the management API's counts lag
	if doc := stats(t, dir, admin); doc.Total != 0 || doc.Backend.NotSeen != 5 {
		t.Errorf("stats with admin= while another consumer holds the DLQ: total %d, not seen %d; want 0 and 5", doc.Total, doc.Backend.NotSeen)
	}
	if code, out := run(t, dir, "--source", admin, "check", "--max-total", "0"); code != 4 {
		t.Errorf("check --max-total 0 with admin=: exit %d, want 4 (five not seen)\n%s", code, out)
	}

	// A redrive waits for the holder to let go.
	go func() {
		time.Sleep(2 * time.Second)
		release()
	}()
	code, out := run(t, dir, "--source", srv.Source(base+"-dlq"), "-o", "json", "redrive", "apply", "p.json")
	if code != 0 || !strings.Contains(out, `"moved": 5`) {
		t.Errorf("apply while another consumer held the DLQ for two seconds: exit %d\n%s", code, out)
	}
	waitDepth(t, srv, base+"-dlq", 0)
}
