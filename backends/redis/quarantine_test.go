package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// seedPoison makes a stream with a group "workers" whose pending entries
// have known consumers, idle times and delivery counts:
//
//	entry  fields                         consumer  deliveries  idle
//	0      event_id E0, fingerprint, ...  c2        5           10m   moves
//	1      payload only                   c3        7           20m   moves
//	2      event_id E2                    c2        1           10m   too few deliveries
//	3      event_id E3                    c3        9           0     not idle enough
//	4      event_id E4                    -         acked
func seedPoison(t *testing.T, stream string) []string {
	t.Helper()
	ctx := context.Background()
	rdb := shared.Client()
	ids := []string{
		xadd(t, rdb, stream, "event_id", "E0", "fingerprint", "sha256:feed", "payload", `{"n":0}`, "tenant", "acme", "attempts", "1"),
		xadd(t, rdb, stream, "payload", "raw bytes"),
		xadd(t, rdb, stream, "event_id", "E2", "payload", "2"),
		xadd(t, rdb, stream, "event_id", "E3", "payload", "3"),
		xadd(t, rdb, stream, "event_id", "E4", "payload", "4"),
	}
	if err := rdb.XGroupCreate(ctx, stream, "workers", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "c1", Streams: []string{stream, ">"}}).Err(); err != nil {
		t.Fatal(err)
	}
	claim := func(id, consumer string, idle time.Duration, deliveries int) {
		t.Helper()
		if err := rdb.Do(ctx, "XCLAIM", stream, "workers", consumer, 0, id, "IDLE", idle.Milliseconds(), "RETRYCOUNT", deliveries).Err(); err != nil {
			t.Fatalf("XCLAIM %s: %v", id, err)
		}
	}
	claim(ids[0], "c2", 10*time.Minute, 5)
	claim(ids[1], "c3", 20*time.Minute, 7)
	claim(ids[2], "c2", 10*time.Minute, 1)
	claim(ids[3], "c3", 0, 9)
	if err := rdb.XAck(ctx, stream, "workers", ids[4]).Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func pendingIDs(t *testing.T, stream, group string) []string {
	t.Helper()
	p, err := shared.Client().XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 100}).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range p {
		out = append(out, e.ID)
	}
	return out
}

var quarantineNow = time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)

func quarantineOpts(stream string) QuarantineOptions {
	return QuarantineOptions{
		Stream: stream, Group: "workers", MinIdle: 5 * time.Minute, MinDeliveries: 3,
		Reason: "panic: nil pointer in handler", Category: "code-defect", Now: quarantineNow,
	}
}

func TestQuarantineMovesOnlyOverBothThresholds(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	orders, dlq := key(t, "orders"), key(t, "dlq")
	ids := seedPoison(t, orders)
	s := openStream(t, shared.URL(0, dlq), Options{})

	r, err := s.Quarantine(ctx, quarantineOpts(orders))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Moved) != 2 || r.Skipped != 0 || r.AckedDeleted != 0 || r.Limited {
		t.Fatalf("report = %+v, want entries 0 and 1 moved", r)
	}
	moved := map[string]QuarantinedEntry{}
	for _, m := range r.Moved {
		moved[m.ID] = m
	}
	if m := moved[ids[0]]; m.Consumer != "c2" || m.Deliveries != 5 || m.IdleSeconds < 600 || !IsStreamID(m.DLQID) {
		t.Errorf("entry 0 report = %+v", m)
	}
	if m := moved[ids[1]]; m.Consumer != "c3" || m.Deliveries != 7 || m.IdleSeconds < 1200 {
		t.Errorf("entry 1 report = %+v", m)
	}
	if got := pendingIDs(t, orders, "workers"); !reflect.DeepEqual(got, ids[2:4]) {
		t.Errorf("still pending %v, want %v", got, ids[2:4])
	}

	// The envelopes, as dlqctl reads them back.
	names := envelope.DefaultFieldNames()
	read := func(dlqID string) (envelope.Envelope, []string) {
		msgs, err := rdb.XRange(ctx, dlq, dlqID, dlqID).Result()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("DLQ entry %s: %v", dlqID, err)
		}
		return envelope.DecodeFields(dlqID, "redis", stringFields(msgs[0].Values), names), entryFields(t, rdb, dlq, dlqID)
	}
	e, raw := read(moved[ids[0]].DLQID)
	wantOrigin := envelope.Origin{Backend: "redis", Topic: orders, Subscription: "workers", Consumer: "c2"}
	if e.Malformed != "" || e.EventID != "E0" || e.Fingerprint != "sha256:feed" || e.FingerprintComputed ||
		e.Origin != wantOrigin || e.Attempts != 5 || e.LastError != "panic: nil pointer in handler" ||
		e.ErrorClass != "code-defect" || !e.DeadLetteredAt.Equal(quarantineNow) ||
		!e.FirstReceivedAt.Equal(idTime(t, ids[0])) || string(e.Payload) != `{"n":0}` ||
		!reflect.DeepEqual(e.Properties, map[string]string{"tenant": "acme"}) {
		t.Errorf("entry 0 envelope = %+v", e)
	}
	// The original fields keep their place (attempts replaced where it
	// stood); the added ones follow.
	if want := []string{"event_id", "E0", "fingerprint", "sha256:feed", "payload", `{"n":0}`, "tenant", "acme", "attempts", "5"}; !reflect.DeepEqual(raw[:len(want)], want) {
		t.Errorf("entry 0 fields start %q, want %q", raw[:len(want)], want)
	}

	e, _ = read(moved[ids[1]].DLQID)
	if e.Malformed != "" || e.EventID != ids[1] || e.FingerprintComputed ||
		e.Fingerprint != envelope.ComputeFingerprint([]byte("raw bytes")) || e.Origin.Consumer != "c3" || e.Attempts != 7 {
		t.Errorf("entry 1 envelope = %+v (event_id is the stream id and the fingerprint is carried, computed at quarantine)", e)
	}

	// A second run finds nothing more.
	r, err = s.Quarantine(ctx, quarantineOpts(orders))
	if err != nil || len(r.Moved) != 0 || xlen(t, rdb, dlq) != 2 {
		t.Errorf("second run: %+v, %v", r, err)
	}
}

func idTime(t *testing.T, id string) time.Time {
	ms, err := strconv.ParseInt(strings.SplitN(id, "-", 2)[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms).UTC()
}

func TestQuarantineDryRunAndLimit(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	orders, dlq := key(t, "orders"), key(t, "dlq")
	ids := seedPoison(t, orders)
	s := openStream(t, shared.URL(0, dlq), Options{})

	opts := quarantineOpts(orders)
	opts.DryRun = true
	r, err := s.Quarantine(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var would []string
	for _, w := range r.WouldMove {
		would = append(would, w.ID)
	}
	if !reflect.DeepEqual(would, ids[:2]) || len(r.Moved) != 0 || !r.DryRun {
		t.Errorf("dry run = %+v, want entries 0 and 1 listed", r)
	}
	if xlen(t, rdb, dlq) != 0 || len(pendingIDs(t, orders, "workers")) != 4 {
		t.Error("a dry run changed something")
	}

	opts.DryRun, opts.Limit = false, 1
	r, err = s.Quarantine(ctx, opts)
	if err != nil || len(r.Moved) != 1 || r.Moved[0].ID != ids[0] || !r.Limited {
		t.Errorf("limit 1 = %+v, %v", r, err)
	}
}

func TestQuarantineSkipsWhatChangedSinceTheScan(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	orders, dlq := key(t, "orders"), key(t, "dlq")
	ids := seedPoison(t, orders)
	s := openStream(t, shared.URL(0, dlq), Options{})
	opts := quarantineOpts(orders)

	scan, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: orders, Group: "workers", Idle: opts.MinIdle, Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(scan) != 3 {
		t.Fatalf("scan: %v, %v", scan, err)
	}
	// Between the scan and the moves: entry 0 is acked by its consumer,
	// entry 1 deleted from the stream (still pending), and entry 2,
	// under the delivery threshold, is in the list all the same.
	rdb.XAck(ctx, orders, "workers", ids[0])
	rdb.XDel(ctx, orders, ids[1])
	r := QuarantineReport{Moved: []QuarantinedEntry{}}
	if err := s.quarantineEntries(ctx, opts, scan, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Moved) != 0 || r.Skipped != 2 || r.AckedDeleted != 1 {
		t.Errorf("report = %+v, want 2 skipped and 1 acked-deleted", r)
	}
	if xlen(t, rdb, dlq) != 0 {
		t.Error("something was added to the DLQ")
	}
	if got := pendingIDs(t, orders, "workers"); !reflect.DeepEqual(got, ids[2:4]) {
		t.Errorf("pending %v, want %v (the deleted entry acked)", got, ids[2:4])
	}

	// Claimed afresh by a consumer: no longer idle, so skipped.
	rdb.Do(ctx, "XCLAIM", orders, "workers", "c9", 0, ids[2], "RETRYCOUNT", 10)
	scan2 := []redis.XPendingExt{{ID: ids[2]}}
	r = QuarantineReport{}
	if err := s.quarantineEntries(ctx, opts, scan2, &r); err != nil || r.Skipped != 1 {
		t.Errorf("freshly claimed entry: %+v, %v; want skipped", r, err)
	}
}

func TestQuarantineErrors(t *testing.T) {
	ctx := context.Background()
	orders, dlq := key(t, "orders"), key(t, "dlq")
	seedPoison(t, orders)
	s := openStream(t, shared.URL(0, dlq), Options{})
	opts := quarantineOpts(orders)
	opts.Group = "nosuch"
	if _, err := s.Quarantine(ctx, opts); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("unknown group: %v, want ErrNotFound", err)
	}
	var ce *backend.ConfigError
	for _, o := range []QuarantineOptions{
		{Stream: dlq, Group: "workers"},
		{Stream: orders},
		{Stream: orders, Group: "workers", MinDeliveries: -1},
	} {
		if _, err := s.Quarantine(ctx, o); !errors.As(err, &ce) {
			t.Errorf("Quarantine(%+v) = %v, want a ConfigError", o, err)
		}
	}

	// A DLQ key of another type fails the run and moves nothing.
	shared.Client().Set(ctx, dlq, "x", 0)
	_, err := s.Quarantine(ctx, quarantineOpts(orders))
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("string DLQ: %v, want WRONGTYPE", err)
	}
	if n := len(pendingIDs(t, orders, "workers")); n != 4 {
		t.Errorf("%d pending after a failed quarantine, want 4", n)
	}
}

func TestQuarantineReportJSON(t *testing.T) {
	b, err := json.Marshal(QuarantineReport{Moved: []QuarantinedEntry{{}}, WouldMove: []PendingEntry{{}}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"acked_deleted", "dlq", "dry_run", "group", "limited", "min_deliveries", "min_idle_seconds", "moved", "skipped", "stream", "would_move"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("report keys = %v, want %v", keys, want)
	}
	moved, _ := json.Marshal(QuarantinedEntry{})
	if string(moved) != `{"id":"","dlq_id":"","consumer":"","deliveries":0,"idle_seconds":0}` {
		t.Errorf("moved entry = %s", moved)
	}
}
