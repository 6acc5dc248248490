package rabbitmq_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/rabbitmq"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/workertest"
)

// run runs one dlqctl command line in-process in dir; it returns the exit
// code and the combined output.
func run(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	io, _, out, errOut := cmd.TestIO()
	env := map[string]string{"DLQCTL_APPROVAL_KEY": "rabbitmq-e2e-approval-key-0123456789abcdef"}
	f := &cmd.Factory{Deps: cmd.Deps{Backends: backend.NewRegistry(rabbitmq.Registration()), IO: io, Now: time.Now, Getenv: func(k string) string { return env[k] }}}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	code := cmd.Execute(context.Background(), f, args)
	return code, out.String() + errOut.String()
}

// TestRealDeadLettersRedriven: the reference worker fails five events and
// RabbitMQ dead-letters them itself — through the DLX by nack on a classic
// origin, and by the delivery limit on a quorum origin; dlqctl lists and
// categorizes them from x-death, and redrives them to the worker, which
// then applies each exactly once under its original message_id.
func TestRealDeadLettersRedriven(t *testing.T) {
	srv := broker.Get(t)
	if srv.AdminURL() == "" {
		t.Fatal("this test needs the management API")
	}
	for _, c := range []struct {
		name   string
		limit  int    // quorum origin's delivery limit; 0 for classic
		reason string // what x-death says
	}{{"classic-nack", 0, "rejected"}, {"quorum-delivery-limit", 2, "delivery_limit"}} {
		t.Run(c.name, func(t *testing.T) {
			base := uniq(t)
			ctx := context.Background()
			if err := rabbitmqtest.DeclareDLX(ctx, srv.Channel(t), base+"-orders", base+"-dlq", false, c.limit); err != nil {
				t.Fatal(err)
			}
			events := []string{"E1", "E2", "E3", "E4", "E5"}
			ch := srv.Channel(t)
			for _, id := range events {
				if err := ch.PublishWithContext(ctx, "", base+"-orders", true, false, amqp.Publishing{
					MessageId: id, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(`{"order":"` + id + `"}`),
				}); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			inbox := filepath.Join(dir, "inbox.db")
			origin := strings.TrimSuffix(srv.URL(), "/") + "/?queue=" + base + "-orders"
			if c.limit > 0 {
				origin += "&requeue=1"
			}
			args := []string{"--source", origin, "--inbox", "sqlite:" + inbox, "--until-idle", "3s"}
			for _, id := range events {
				args = append(args, "--fail", id)
			}
			w := workertest.Start(t, args...)
			if err := w.Wait(); err != nil {
				t.Fatalf("worker: %v\n%s", err, w.Output())
			}
			waitDepth(t, srv, base+"-dlq", len(events))
			source := srv.Source(base + "-dlq")

			code, out := run(t, dir, "--source", source, "list", "-o", "json")
			if code != 0 {
				t.Fatalf("list: %d\n%s", code, out)
			}
			var list struct {
				Items []struct {
					EventID   string `json:"event_id"`
					LastError string `json:"last_error"`
					Attempts  int    `json:"attempts"`
					Origin    struct {
						Topic string `json:"topic"`
					} `json:"origin"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &list); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(list.Items) != len(events) {
				t.Fatalf("list: %d items\n%s", len(list.Items), out)
			}
			for i, it := range list.Items {
				wantAttempts := 1
				if c.limit > 0 {
					wantAttempts = c.limit + 1
				}
				if it.EventID != events[i] || it.LastError != c.reason || it.Origin.Topic != base+"-orders" || it.Attempts != wantAttempts {
					t.Errorf("item %d: %+v, want %s from %s, %q, %d attempts", i, it, events[i], base+"-orders", c.reason, wantAttempts)
				}
			}
			if code, out := run(t, dir, "--source", source, "categorize", "-o", "json"); code != 0 || !strings.Contains(out, `"count": 5`) {
				t.Errorf("categorize: %d\n%s", code, out)
			}

			// The worker comes back without the fault; dlqctl redrives.
			workertest.Start(t, "--source", origin, "--inbox", "sqlite:"+inbox)
			if code, out := run(t, dir, "--source", source, "redrive", "plan", "--reason", "e2e", "--out", "p.json",
				"--allow-disposition", "investigate", "--effects", "sqlite:"+inbox, "--settle", "20s", "--rate", "100", "--ramp", "2,10"); code != 0 {
				t.Fatalf("plan: %d\n%s", code, out)
			}
			if code, out := run(t, dir, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
				t.Fatalf("approve: %d\n%s", code, out)
			}
			code, out = run(t, dir, "--source", source, "-o", "json", "redrive", "apply", "p.json")
			if code != 0 || !strings.Contains(out, `"status": "completed"`) {
				t.Fatalf("apply: %d\n%s", code, out)
			}
			waitDepth(t, srv, base+"-dlq", 0)
			rows := workertest.ReadInbox(t, inbox)
			for _, id := range events {
				if r := rows[id]; r.Effects != 1 {
					t.Errorf("%s: %d effects after the redrive, want 1 (row %+v)", id, r.Effects, r)
				}
			}
		})
	}
}

// TestKeyFromOrdersThePlan: with --key-from header:tenant, an entry is
// held back by an older entry of its own tenant that stays in the DLQ;
// without it these messages (no key header) have no key, and hold
// nothing back.
func TestKeyFromOrdersThePlan(t *testing.T) {
	srv := broker.Get(t)
	dlq := uniq(t)
	ctx := context.Background()
	ch := srv.Channel(t)
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ id, tenant, err string }{
		{"E1", "a", "schema validation failed: missing field amount"},
		{"E2", "a", "timeout"},
		{"E3", "b", "timeout"},
		{"E4", "", "timeout"},
	} {
		h := amqp.Table{"last_error": m.err, "origin_stream": dlq + "-orders"}
		if m.tenant != "" {
			h["tenant"] = m.tenant
		}
		if err := ch.PublishWithContext(ctx, "", dlq, true, false, amqp.Publishing{MessageId: m.id, Body: []byte(`{}`), Headers: h}); err != nil {
			t.Fatal(err)
		}
	}
	waitDepth(t, srv, dlq, 4)
	plan := func(keyFrom ...string) (planned, held []string) {
		t.Helper()
		dir := t.TempDir()
		args := append(append([]string{"--source", srv.Source(dlq)}, keyFrom...),
			"redrive", "plan", "--reason", "key-from", "--out", "p.json", "--rate", "0", "--unverified-ok", "--settle", "0s")
		if code, out := run(t, dir, args...); code != 0 {
			t.Fatalf("plan %v: exit %d\n%s", keyFrom, code, out)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "p.json"))
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Entries []struct {
				EventID string `json:"event_id"`
			} `json:"entries"`
			Excluded []struct {
				EventID string `json:"event_id"`
				HeldBy  string `json:"held_by"`
			} `json:"excluded"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			planned = append(planned, e.EventID)
		}
		for _, x := range p.Excluded {
			if x.HeldBy != "" {
				held = append(held, x.EventID)
			}
		}
		return planned, held
	}
	if planned, held := plan("--key-from", "header:tenant"); strings.Join(planned, ",") != "E3,E4" || strings.Join(held, ",") != "E2" {
		t.Errorf("--key-from header:tenant: planned %v, held back %v; want E3,E4 and E2", planned, held)
	}
	// Without it no entry has a key, and a plan holds back by key only.
	if planned, held := plan(); strings.Join(planned, ",") != "E2,E3,E4" || len(held) != 0 {
		t.Errorf("without --key-from: planned %v, held back %v; want E2,E3,E4 and none", planned, held)
	}
	waitDepth(t, srv, dlq, 4)
}
