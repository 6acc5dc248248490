package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/pgtest"
	"github.com/dlqctl/dlqctl/redrive"
)

func TestRedisSQLite(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	evs := orderEvents(20)
	xadd(t, rdb, "orders", evs...)
	db := filepath.Join(t.TempDir(), "consumer.db")

	r := mustRun(t, 0, "--source", redisSourceURL(srv, "orders", "order-workers", "w1"),
		"--inbox", "sqlite:"+db, "--until-idle", "500ms", "--log")

	if !strings.Contains(r.stdout, "processed=20 applied=20 absorbed=0 conflict=0 failed=0") {
		t.Errorf("stdout: %s", r.stdout)
	}
	wants := map[string]want{}
	for _, e := range evs {
		wants[e.id] = want{attempts: 1, effects: 1, status: statusDone, fingerprint: e.fingerprint(), verdict: redrive.VerdictApplied}
	}
	checkInbox(t, "sqlite:"+db, wants)
	if log := sqliteEffectsLog(t, db); sum(log) != 20 || len(log) != 20 {
		t.Errorf("effects_log: %v, want one row for each of 20 events", log)
	}
	if n := pendingCount(t, rdb, "orders", "order-workers"); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
	// One line per message, and no payload in it.
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 20 || !strings.HasPrefix(lines[0], "event_id=E1 attempts=1 effects=1 outcome=applied id=") {
		t.Errorf("log lines:\n%s", r.stderr)
	}
	for _, secret := range []string{"order-1", "example.com", "amount"} {
		if strings.Contains(r.stderr, secret) {
			t.Errorf("the log shows payload data %q:\n%s", secret, r.stderr)
		}
	}
}

func TestRedisPostgres(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	pg := pgtest.Start(t)
	newDB := func(t *testing.T, name string) string {
		if err := pg.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatal(err)
		}
		return pg.URL(name)
	}

	t.Run("double-effect and fail", func(t *testing.T) {
		inbox := newDB(t, "app1")
		evs := orderEvents(20)
		evs[3].extra = append(evs[3].extra, "error_class", "schema", "last_error", "cannot parse amount", "redrive_count", "1")
		xadd(t, rdb, "orders", evs...)
		mustRun(t, 0, "--source", redisSourceURL(srv, "orders", "order-workers", ""),
			"--inbox", inbox, "--until-idle", "500ms",
			"--double-effect", "E3", "--fail", "E4", "--fail-error", "payments: connection refused")

		wants := map[string]want{}
		for _, e := range evs {
			wants[e.id] = want{attempts: 1, effects: 1, status: statusDone, fingerprint: e.fingerprint(), verdict: redrive.VerdictApplied}
		}
		wants["E3"] = want{attempts: 1, effects: 2, status: statusDone, fingerprint: evs[2].fingerprint(), verdict: redrive.VerdictDuplicateEffect}
		wants["E4"] = want{attempts: 1, effects: 0, status: statusFailed, fingerprint: evs[3].fingerprint(), verdict: redrive.VerdictReDeadLettered, back: true}
		checkInbox(t, inbox, wants)
		log := pgEffectsLog(t, inbox)
		if log["E3"] != 2 || log["E4"] != 0 || sum(log) != 20 {
			t.Errorf("effects_log rows per event: %v; want E3 2, E4 none, 20 in all", log)
		}
		if n := pendingCount(t, rdb, "orders", "order-workers"); n != 0 {
			t.Errorf("pending = %d, want 0 (E4 acked with its dead-lettering)", n)
		}

		dlq, err := rdb.XRange(context.Background(), "orders-dlq", "-", "+").Result()
		if err != nil || len(dlq) != 1 {
			t.Fatalf("orders-dlq: %v, %v; want E4 alone", dlq, err)
		}
		fields := map[string]string{}
		for k, v := range dlq[0].Values {
			fields[k] = fmt.Sprint(v)
		}
		e := envelope.DecodeFields(dlq[0].ID, "redis", fields, envelope.DefaultFieldNames())
		switch {
		case e.Malformed != "":
			t.Errorf("DLQ entry malformed: %s", e.Malformed)
		case e.EventID != "E4" || e.LastError != "payments: connection refused" || e.Attempts != 1:
			t.Errorf("DLQ entry: event_id=%s last_error=%q attempts=%d", e.EventID, e.LastError, e.Attempts)
		case string(e.Payload) != evs[3].payload || e.Fingerprint != evs[3].fingerprint() || e.FingerprintComputed == evs[3].carry:
			t.Errorf("DLQ entry payload %s fingerprint %s (computed %v): want the original fields, no fingerprint added", e.Payload, e.Fingerprint, e.FingerprintComputed)
		case e.Origin.Topic != "orders" || e.Origin.Subscription != "order-workers" || e.Origin.Consumer == "":
			t.Errorf("DLQ entry origin: %+v", e.Origin)
		case e.Properties["tenant"] != "acme" || e.RedriveCount != 1 || e.DeadLetteredAt.IsZero():
			t.Errorf("DLQ entry properties %v, redrive_count %d, dead_lettered_at %v", e.Properties, e.RedriveCount, e.DeadLetteredAt)
		}
		// The stale error_class of E4's earlier trip through the DLQ is
		// blanked, so dlqctl categorizes the new last_error.
		if c := envelope.NewClassifier(envelope.DefaultRules()).Classify(e, false); c.Category != "transient" {
			t.Errorf("DLQ entry categorized %s (%s), want transient from last_error", c.Category, c.Reason)
		}
	})

	t.Run("crash after commit", func(t *testing.T) {
		inbox := newDB(t, "app2")
		checkCrashAfterCommit(t, srv, "payments", inbox)
	})
}

// checkCrashAfterCommit: the first run commits E5 and exits 3 before the
// ack; the second run gets E5 again from its pending entries and absorbs it.
func checkCrashAfterCommit(t *testing.T, srv *redistest.Server, stream, inbox string) {
	t.Helper()
	rdb := srv.Client()
	evs := orderEvents(10)
	xadd(t, rdb, stream, evs...)
	args := []string{"--source", redisSourceURL(srv, stream, "g", "w1"), "--inbox", inbox,
		"--until-idle", "500ms", "--crash-after-commit", "E5", "--log"}

	r := mustRun(t, 3, args...)
	if !strings.Contains(r.stderr, "event_id=E5 attempts=1 effects=1 outcome=applied") {
		t.Errorf("first run's log:\n%s", r.stderr)
	}
	checkInbox(t, inbox, map[string]want{
		"E4": {attempts: 1, effects: 1, status: statusDone},
		"E5": {attempts: 1, effects: 1, status: statusDone},
	})
	if got := records(t, inbox, "E6"); len(got) != 0 {
		t.Errorf("E6 processed before the crash: %v", got)
	}
	// E5 and the rest of its XREADGROUP batch were delivered, not acked.
	if n := pendingCount(t, rdb, stream, "g"); n != 6 {
		t.Errorf("pending after the crash = %d, want 6 (E5…E10)", n)
	}

	r = mustRun(t, 0, args...)
	if !strings.Contains(r.stdout, "processed=6 applied=5 absorbed=1") {
		t.Errorf("second run: %s", r.stdout)
	}
	wants := map[string]want{}
	for _, e := range evs {
		wants[e.id] = want{attempts: 1, effects: 1, status: statusDone, fingerprint: e.fingerprint(), verdict: redrive.VerdictApplied}
	}
	wants["E5"] = want{attempts: 2, effects: 1, status: statusDone, fingerprint: evs[4].fingerprint(), verdict: redrive.VerdictAbsorbedDuplicate}
	checkInbox(t, inbox, wants)
	if n := pendingCount(t, rdb, stream, "g"); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
}

func TestCrashAfterCommitSQLite(t *testing.T) {
	srv := redistest.Start(t)
	checkCrashAfterCommit(t, srv, "orders", "sqlite:"+filepath.Join(t.TempDir(), "consumer.db"))
}

func TestConflict(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	db := filepath.Join(t.TempDir(), "consumer.db")
	args := []string{"--source", redisSourceURL(srv, "orders", "g", "w1"), "--inbox", "sqlite:" + db, "--until-idle", "300ms", "--log"}
	original := event{id: "E1", payload: `{"orderId":"order-1","amount":1200}`}
	other := event{id: "E1", payload: `{"orderId":"order-1","amount":9900}`, carry: true}

	xadd(t, rdb, "orders", original)
	mustRun(t, 0, args...)
	xadd(t, rdb, "orders", other)
	r := mustRun(t, 0, args...)
	if !strings.Contains(r.stderr, "event_id=E1 attempts=2 effects=1 outcome=conflict") {
		t.Errorf("log:\n%s", r.stderr)
	}
	// The inbox keeps the fingerprint it applied; dlqctl, reconciling the
	// other payload, sees a conflict.
	rec := records(t, "sqlite:"+db, "E1")["E1"]
	if rec.Attempts != 2 || rec.Effects != 1 || rec.Status != statusConflict || rec.Fingerprint != original.fingerprint() {
		t.Errorf("E1 after the conflict: %+v", rec)
	}
	if v := redrive.Judge(other.fingerprint(), rec, true, false); v != redrive.VerdictConflict {
		t.Errorf("verdict for the other payload: %s, want conflict", v)
	}

	// The original again: absorbed, and the conflict stays on record.
	xadd(t, rdb, "orders", original)
	mustRun(t, 0, args...)
	rec = records(t, "sqlite:"+db, "E1")["E1"]
	if rec.Attempts != 3 || rec.Effects != 1 || rec.Status != statusConflict {
		t.Errorf("E1 after the original again: %+v", rec)
	}
	if log := sqliteEffectsLog(t, db); log["E1"] != 1 {
		t.Errorf("effects_log: %v, want one row for E1", log)
	}
	if n := pendingCount(t, rdb, "orders", "g"); n != 0 {
		t.Errorf("pending = %d, want 0 (a conflict is acked)", n)
	}
}

// TestRedelivery: an event delivered again after its effect committed, as
// a redrive (same fields plus dlqctl's markers) or as the pending entry of
// a worker that died after its commit, claimed by another.
func TestRedelivery(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "consumer.db")
	inbox := "sqlite:" + db
	evs := orderEvents(6)
	source := func(consumer string) string { return redisSourceURL(srv, "orders", "g", consumer) }

	xadd(t, rdb, "orders", evs[:3]...)
	mustRun(t, 0, "--source", source("w1"), "--inbox", inbox, "--until-idle", "300ms")

	// E2 redriven: dlqctl's markers and redrive_count + 1, same event_id,
	// same payload and fingerprint.
	redriven := evs[1]
	redriven.extra = append(redriven.extra, "redrive_count", "1",
		"dlqctl_run_id", "run-1", "dlqctl_seq", "1", "dlqctl_redriven_from", "1732890000000-0")
	xadd(t, rdb, "orders", redriven)
	r := mustRun(t, 0, "--source", source("w1"), "--inbox", inbox, "--until-idle", "300ms")
	if !strings.Contains(r.stdout, "processed=1 applied=0 absorbed=1") {
		t.Errorf("redriven E2: %s", r.stdout)
	}

	// E4 is committed by worker "peer", which dies before its ack; "w1"
	// claims the pending entry and gets it again.
	xadd(t, rdb, "orders", evs[3])
	mustRun(t, 3, "--source", source("peer"), "--inbox", inbox, "--until-idle", "300ms", "--crash-after-commit", "E4")
	pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "orders", Group: "g", Start: "-", End: "+", Count: 10, Consumer: "peer"}).Result()
	if err != nil || len(pend) != 1 {
		t.Fatalf("peer's pending: %v, %v", pend, err)
	}
	if err := rdb.XClaim(ctx, &redis.XClaimArgs{Stream: "orders", Group: "g", Consumer: "w1", MinIdle: time.Millisecond, Messages: []string{pend[0].ID}}).Err(); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, 0, "--source", source("w1"), "--inbox", inbox, "--until-idle", "300ms")
	if !strings.Contains(r.stdout, "processed=1 applied=0 absorbed=1") {
		t.Errorf("claimed E4: %s", r.stdout)
	}

	checkInbox(t, inbox, map[string]want{
		"E1": {attempts: 1, effects: 1, status: statusDone, fingerprint: evs[0].fingerprint(), verdict: redrive.VerdictApplied},
		"E2": {attempts: 2, effects: 1, status: statusDone, fingerprint: evs[1].fingerprint(), verdict: redrive.VerdictAbsorbedDuplicate},
		"E4": {attempts: 2, effects: 1, status: statusDone, fingerprint: evs[3].fingerprint(), verdict: redrive.VerdictAbsorbedDuplicate},
	})
	if log := sqliteEffectsLog(t, db); log["E2"] != 1 || log["E4"] != 1 || sum(log) != 4 {
		t.Errorf("effects_log: %v", log)
	}
	if n := pendingCount(t, rdb, "orders", "g"); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
}

// TestRedisMalformed: an entry without event_id cannot be deduplicated; it
// goes to the DLQ as it came, with the reason, and the inbox stays empty.
func TestRedisMalformed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders", Values: []string{"payload", `{"orderId":"x"}`}}).Err(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "consumer.db")
	r := mustRun(t, 0, "--source", redisSourceURL(srv, "orders", "g", "w1"), "--dlq", "parking",
		"--inbox", "sqlite:"+db, "--until-idle", "300ms", "--log")
	if !strings.Contains(r.stdout, "failed=1") || !strings.Contains(r.stderr, "outcome=failed reason=malformed") {
		t.Errorf("stdout %s stderr %s", r.stdout, r.stderr)
	}
	dlq, err := rdb.XRange(ctx, "parking", "-", "+").Result()
	if err != nil || len(dlq) != 1 || !strings.Contains(fmt.Sprint(dlq[0].Values["last_error"]), "no event_id") {
		t.Errorf("parking: %v, %v", dlq, err)
	}
	if n := pendingCount(t, rdb, "orders", "g"); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
}

// TestPendingDeleted: a pending entry deleted from the stream has nothing
// left to process; the worker clears it from its pending list.
func TestPendingDeleted(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	xadd(t, rdb, "orders", orderEvents(2)...)
	if err := rdb.XGroupCreate(ctx, "orders", "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "w1", Streams: []string{"orders", ">"}, Count: 1, Block: -1}).Result()
	if err != nil || len(got[0].Messages) != 1 {
		t.Fatalf("%v %v", got, err)
	}
	if err := rdb.XDel(ctx, "orders", got[0].Messages[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "--source", redisSourceURL(srv, "orders", "g", "w1"),
		"--inbox", "sqlite:"+filepath.Join(t.TempDir(), "consumer.db"), "--until-idle", "300ms")
	if !strings.Contains(r.stdout, "processed=1 applied=1") {
		t.Errorf("stdout: %s", r.stdout)
	}
	if n := pendingCount(t, rdb, "orders", "g"); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
}
