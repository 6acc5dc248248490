package redisstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/envelope"
)

// entryFields is an entry's fields as name/value pairs in their stored
// order (go-redis's XMessage holds them in a map), nil when it is absent.
func entryFields(t *testing.T, rdb *redis.Client, stream, id string) []string {
	t.Helper()
	reply, err := rdb.Do(context.Background(), "XRANGE", stream, id, id).Slice()
	if err != nil {
		t.Fatalf("XRANGE %s %s: %v", stream, id, err)
	}
	if len(reply) == 0 {
		return nil
	}
	entry := reply[0].([]any)
	var out []string
	for _, v := range entry[1].([]any) {
		out = append(out, v.(string))
	}
	return out
}

func xlen(t *testing.T, rdb *redis.Client, stream string) int64 {
	t.Helper()
	n, err := rdb.XLen(context.Background(), stream).Result()
	if err != nil {
		t.Fatalf("XLEN %s: %v", stream, err)
	}
	return n
}

func commandCalls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

// roundTrips counts what a client sends: single commands and pipelines.
type roundTrips struct {
	single, pipelines atomic.Int64
	beforePipeline    func()
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.single.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		if h.beforePipeline != nil {
			h.beforePipeline()
		}
		return next(ctx, cmds)
	}
}

var testMarkers = backend.Markers{RunID: "run-1"}

func TestPublishMovesWithMarkers(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	fp := envelope.ComputeFingerprint([]byte(`{"n":1}`))
	a := xadd(t, rdb, dlq, "event_id", "E1", "fingerprint", fp, "payload", `{"n":1}`,
		"origin_stream", orders, "tenant", "acme", "redrive_count", "2", "attempts", "5")
	// Dead-lettered again after an earlier redrive: its old markers are
	// replaced, not repeated. No fingerprint field: moved unverified.
	b := xadd(t, rdb, dlq, "event_id", "E2", "payload", "plain",
		backend.MarkerRunID, "run-0", "origin_stream", orders, backend.MarkerSeq, "9", backend.MarkerRedrivenFrom, "1-1")
	s := openStream(t, shared.URL(0, dlq), Options{})

	items := []backend.MoveItem{
		{Seq: 1, ID: a, EventID: "E1", Fingerprint: strings.ToUpper(fp), Dest: orders}, // compared case-insensitively
		{Seq: 2, ID: b, EventID: "E2", Fingerprint: envelope.ComputeFingerprint([]byte("plain")), Dest: orders},
	}
	res, err := s.Publish(ctx, items, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Removed || !IsStreamID(r.DestID) {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	want := [][]string{
		{"event_id", "E1", "fingerprint", fp, "payload", `{"n":1}`, "origin_stream", orders, "tenant", "acme",
			"redrive_count", "3", "attempts", "5", "dlqctl_run_id", "run-1", "dlqctl_seq", "1", "dlqctl_redriven_from", a},
		{"event_id", "E2", "payload", "plain", "origin_stream", orders, "redrive_count", "1",
			"dlqctl_run_id", "run-1", "dlqctl_seq", "2", "dlqctl_redriven_from", b},
	}
	for i, r := range res {
		if got := entryFields(t, rdb, orders, r.DestID); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("moved entry %d:\n got %q\nwant %q", i, got, want[i])
		}
	}
	if n := xlen(t, rdb, dlq); n != 0 {
		t.Errorf("DLQ still holds %d entries", n)
	}

	// The moved entry decodes with its event ID, fingerprint and payload.
	msgs, _ := rdb.XRange(ctx, orders, res[0].DestID, res[0].DestID).Result()
	e := s.decode(msgs[0])
	if e.EventID != "E1" || e.Fingerprint != fp || e.RedriveCount != 3 || e.Properties[backend.MarkerRunID] != "run-1" {
		t.Errorf("moved entry decodes to %+v", e)
	}

	// A second Publish of the same items finds them gone: never moved twice.
	res, err = s.Publish(ctx, items, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !errors.Is(r.Err, backend.ErrNotFound) || r.Removed || r.DestID != "" {
			t.Errorf("second publish, item %d = %+v, want ErrNotFound", i, r)
		}
	}
	if n := xlen(t, rdb, orders); n != 2 {
		t.Errorf("destination holds %d entries after a second publish, want 2", n)
	}
}

func TestPublishChangedFingerprint(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	id := xadd(t, rdb, dlq, "event_id", "E1", "fingerprint", "sha256:aaaa", "payload", "x")
	s := openStream(t, shared.URL(0, dlq), Options{})
	res, err := s.Publish(ctx, []backend.MoveItem{{Seq: 1, ID: id, Fingerprint: "sha256:bbbb", Dest: orders}}, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, backend.ErrChanged) || !strings.Contains(res[0].Err.Error(), "sha256:aaaa") {
		t.Errorf("result = %+v, want ErrChanged naming the fingerprint found", res[0])
	}
	if xlen(t, rdb, dlq) != 1 || xlen(t, rdb, orders) != 0 {
		t.Error("a changed entry was moved")
	}

	// With configured names, the fingerprint is found under its alias.
	s2 := openStream(t, shared.URL(0, dlq), Options{Fields: envelope.FieldNames{envelope.FieldFingerprint: {"fp", "fingerprint"}}})
	res, err = s2.Publish(ctx, []backend.MoveItem{{Seq: 1, ID: id, Fingerprint: "sha256:bbbb", Dest: orders}}, testMarkers)
	if err != nil || !errors.Is(res[0].Err, backend.ErrChanged) {
		t.Errorf("alias fingerprint: %+v, %v; want ErrChanged", res, err)
	}
}

func TestPublishAcksInGroup(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	a := xadd(t, rdb, dlq, "event_id", "E1", "payload", "x")
	b := xadd(t, rdb, dlq, "event_id", "E2", "payload", "y")
	if err := rdb.XGroupCreate(ctx, dlq, "dlqctl", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "dlqctl", Consumer: "op", Streams: []string{dlq, ">"}}).Err(); err != nil {
		t.Fatal(err)
	}
	s := openStream(t, shared.URL(0, dlq)+"&group=dlqctl", Options{})
	res, err := s.Publish(ctx, []backend.MoveItem{{Seq: 1, ID: a, Dest: orders}}, testMarkers)
	if err != nil || res[0].Err != nil {
		t.Fatalf("publish: %+v, %v", res, err)
	}
	res, err = s.Remove(ctx, []backend.MoveItem{{Seq: 2, ID: b}})
	if err != nil || res[0].Err != nil || !res[0].Removed {
		t.Fatalf("remove: %+v, %v", res, err)
	}
	p, err := rdb.XPending(ctx, dlq, "dlqctl").Result()
	if err != nil || p.Count != 0 {
		t.Errorf("pending after publish and remove = %+v, %v; want 0", p, err)
	}

	// A group that does not exist fails the item before anything is written.
	c := xadd(t, rdb, dlq, "event_id", "E3", "payload", "z")
	s2 := openStream(t, shared.URL(0, dlq)+"&group=nosuch", Options{})
	res, err = s2.Publish(ctx, []backend.MoveItem{{Seq: 3, ID: c, Dest: orders}}, testMarkers)
	if err != nil || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "NOGROUP") {
		t.Fatalf("publish with a missing group: %+v, %v; want a NOGROUP item error", res, err)
	}
	if entryFields(t, rdb, dlq, c) == nil || xlen(t, rdb, orders) != 1 {
		t.Error("a failed move wrote something")
	}
	res, err = s2.Remove(ctx, []backend.MoveItem{{Seq: 3, ID: c}})
	if err != nil || res[0].Err == nil || entryFields(t, rdb, dlq, c) == nil {
		t.Errorf("remove with a missing group: %+v, %v; want an item error and the entry kept", res, err)
	}
}

func TestPublishChunkIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	pipe := rdb.Pipeline()
	for i := range 301 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: dlq, Values: []string{"event_id", fmt.Sprint("E", i), "payload", "p"}})
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var items []backend.MoveItem
	for i, c := range cmds {
		items = append(items, backend.MoveItem{Seq: int64(i + 1), ID: c.(*redis.StringCmd).Val(), Dest: orders})
	}
	s := openStream(t, shared.URL(0, dlq), Options{})

	// First use after SCRIPT FLUSH: NOSCRIPT, load, send again.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Publish(ctx, items[:1], testMarkers)
	if err != nil || res[0].Err != nil {
		t.Fatalf("first publish after SCRIPT FLUSH: %+v, %v", res, err)
	}

	h := &roundTrips{}
	s.Client().AddHook(h)
	before := commandCalls(t, rdb, "evalsha")
	res, err = s.Publish(ctx, items[1:], testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	if p, c := h.pipelines.Load(), h.single.Load(); p != 1 || c != 0 {
		t.Errorf("300 moves took %d pipelines and %d single commands, want 1 and 0", p, c)
	}
	// One script call per moveManyMax moves.
	if n, want := commandCalls(t, rdb, "evalsha")-before, (300+moveManyMax-1)/moveManyMax; n != want {
		t.Errorf("server ran EVALSHA %d times, want %d", n, want)
	}
	if xlen(t, rdb, orders) != 301 || xlen(t, rdb, dlq) != 0 {
		t.Error("not every entry moved")
	}
	// Order holds: the destination has them in plan order.
	msgs, _ := rdb.XRange(ctx, orders, "-", "+").Result()
	for i, m := range msgs {
		if m.Values["event_id"] != fmt.Sprint("E", i) {
			t.Fatalf("destination entry %d is %v", i, m.Values["event_id"])
		}
	}
}

func TestPublishItemErrorsStayPerItem(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders, str := key(t, "dlq"), key(t, "orders"), key(t, "str")
	rdb.Set(ctx, str, "not a stream", 0)
	a := xadd(t, rdb, dlq, "event_id", "E1", "payload", "x")
	b := xadd(t, rdb, dlq, "event_id", "E2", "payload", "y")
	c := xadd(t, rdb, dlq, "event_id", "E3", "payload", "z", "redrive_count", "lots")
	d := xadd(t, rdb, dlq, "event_id", "E4", "payload", "w")
	s := openStream(t, shared.URL(0, dlq), Options{})
	res, err := s.Publish(ctx, []backend.MoveItem{
		{Seq: 1, ID: a, Dest: orders},
		{Seq: 2, ID: b, Dest: str},
		{Seq: 3, ID: c, Dest: orders},
		{Seq: 4, ID: d, Dest: ""},
	}, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Removed {
		t.Errorf("item 1 = %+v, want moved", res[0])
	}
	if res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "WRONGTYPE") || errors.Is(res[1].Err, backend.ErrNotFound) {
		t.Errorf("item 2 (string destination) = %+v, want a WRONGTYPE error", res[1])
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "lots") {
		t.Errorf("item 3 (redrive_count lots) = %+v, want an error", res[2])
	}
	if res[3].Err == nil || !strings.Contains(res[3].Err.Error(), "no destination") {
		t.Errorf("item 4 (no dest) = %+v", res[3])
	}
	for _, id := range []string{b, c, d} {
		if entryFields(t, rdb, dlq, id) == nil {
			t.Errorf("failed item %s left the DLQ", id)
		}
	}
	if xlen(t, rdb, orders) != 1 {
		t.Errorf("destination has %d entries, want 1", xlen(t, rdb, orders))
	}
}

func TestPublishConnectionLost(t *testing.T) {
	srv := redistest.Start(t)
	dlq := "dlq"
	id := xadd(t, srv.Client(), dlq, "event_id", "E1", "payload", "x")
	s := openStream(t, srv.URL(0, dlq), Options{})
	if err := s.move.Load(context.Background(), s.Client()).Err(); err != nil {
		t.Fatal(err)
	}
	s.Client().AddHook(&roundTrips{beforePipeline: func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}})
	start := time.Now()
	res, err := s.Publish(context.Background(), []backend.MoveItem{{Seq: 1, ID: id, Dest: "orders"}}, testMarkers)
	if err == nil {
		t.Fatalf("publish with the server gone = %+v, want an error", res)
	}
	if res != nil {
		t.Errorf("results %+v with an error: the outcomes are unknown", res)
	}
	t.Log(err)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("publish took %s to fail", d)
	}
}

// cutProxy is a fault-injecting fake: a TCP proxy in front of a real
// server that, once armed, forwards the next EVALSHA and then closes the
// connection instead of passing the reply back, so that the script runs
// but its outcome is lost, which a real server cannot be made to do.
type cutProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	srv, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	var cut atomic.Bool
	closeBoth := func() { c.Close(); srv.Close() }
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if bytes.Contains(bytes.ToLower(buf[:n]), []byte("evalsha")) && p.armed.CompareAndSwap(true, false) {
					cut.Store(true)
				}
				if _, werr := srv.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		closeBoth()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := srv.Read(buf)
		if n > 0 {
			if cut.Load() {
				break // the server ran it; the client never hears
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	closeBoth()
}

// A connection lost after the server ran the move but before the reply
// arrived: Publish must say the outcome is unknown, not send the script
// again (go-redis retries pipelines), which would answer "gone" for an
// entry that this very call moved.
func TestPublishReplyLost(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	id := xadd(t, rdb, dlq, "event_id", "E1", "payload", "x")
	proxy := startCutProxy(t, shared.Addr())
	s := openStream(t, "redis://"+proxy.ln.Addr().String()+"/0?stream="+dlq, Options{})
	if err := s.move.Load(ctx, s.Client()).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	res, err := s.Publish(ctx, []backend.MoveItem{{Seq: 1, ID: id, Dest: orders}}, testMarkers)
	if err == nil {
		t.Fatalf("publish whose reply was lost = %+v, want an error (outcome unknown)", res)
	}
	if xlen(t, rdb, orders) != 1 || xlen(t, rdb, dlq) != 0 {
		t.Errorf("the move should have run exactly once on the server: dest %d, DLQ %d", xlen(t, rdb, orders), xlen(t, rdb, dlq))
	}
}

// In a (one-node) Redis Cluster, a move whose streams are in different
// hash slots fails with the slots named; with a common hash tag it works.
func TestPublishCrossSlot(t *testing.T) {
	srv := redistest.Start(t, "--cluster-enabled", "yes")
	ctx := context.Background()
	rdb := srv.Client()
	if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := rdb.ClusterInfo(ctx).Result()
		if strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok: %s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dlq := "{dlq}"
	a := xadd(t, rdb, dlq, "event_id", "E1", "payload", "x")
	b := xadd(t, rdb, dlq, "event_id", "E2", "payload", "y")
	s := openStream(t, srv.URL(0, dlq), Options{})
	res, err := s.Publish(ctx, []backend.MoveItem{{Seq: 1, ID: a, Dest: "orders"}, {Seq: 2, ID: b, Dest: "{dlq}:orders"}}, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("(hash slot %d) and \"orders\" (hash slot %d)", keySlot(dlq), keySlot("orders"))
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), want) {
		t.Errorf("cross-slot move = %+v, want an error containing %q", res[0], want)
	}
	t.Log(res[0].Err)
	if res[1].Err != nil || !res[1].Removed {
		t.Errorf("same-slot move = %+v", res[1])
	}
	if entryFields(t, rdb, dlq, a) == nil {
		t.Error("the cross-slot entry left the DLQ")
	}
}

func TestKeySlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16 check value = %#x, want 0x31c3", got)
	}
	for k, want := range map[string]int{
		"foo": 12182, "somekey": 11058, "foo{hash_tag}": 2515, "{hash_tag}bar": 2515,
		"foo{}{bar}": keySlotWhole("foo{}{bar}"), "foo{{bar}}zap": keySlotWhole("{bar"),
	} {
		if got := keySlot(k); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", k, got, want)
		}
	}
}

func keySlotWhole(s string) int { return int(crc16(s) % 16384) }

// The move script's redrive_count: found under the first of its names the
// entry has (an alias too), raised in place; an empty one counts as 0; one
// that is not a whole number fails the item before anything is written.
// The fingerprint, too, is looked up by the first name present.
func TestPublishRedriveCountNames(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	fp := envelope.ComputeFingerprint([]byte("x"))
	names := envelope.FieldNames{envelope.FieldRedriveCount: {"retries", "redrive_count"}, envelope.FieldFingerprint: {"fp", "fingerprint"}}
	s := openStream(t, shared.URL(0, dlq), Options{Fields: names})
	alias := xadd(t, rdb, dlq, "event_id", "E1", "redrive_count", "7", "payload", "x", "retries", "2", "fp", fp, "fingerprint", "sha256:other")
	empty := xadd(t, rdb, dlq, "event_id", "E2", "retries", "", "payload", "x")
	bad := xadd(t, rdb, dlq, "event_id", "E3", "retries", "two", "payload", "x")
	res, err := s.Publish(ctx, []backend.MoveItem{
		{Seq: 1, ID: alias, Fingerprint: fp, Dest: orders},
		{Seq: 2, ID: empty, Dest: orders},
		{Seq: 3, ID: bad, Dest: orders},
	}, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"event_id", "E1", "redrive_count", "7", "payload", "x", "retries", "3", "fp", fp, "fingerprint", "sha256:other",
			"dlqctl_run_id", "run-1", "dlqctl_seq", "1", "dlqctl_redriven_from", alias},
		{"event_id", "E2", "retries", "1", "payload", "x", "dlqctl_run_id", "run-1", "dlqctl_seq", "2", "dlqctl_redriven_from", empty},
	}
	for i, w := range want {
		if res[i].Err != nil {
			t.Fatalf("item %d: %v", i, res[i].Err)
		}
		if got := entryFields(t, rdb, orders, res[i].DestID); !reflect.DeepEqual(got, w) {
			t.Errorf("moved entry %d:\n got %q\nwant %q", i, got, w)
		}
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "field retries of "+bad+" is not a whole number: two") {
		t.Errorf("item 3: %+v, want the redrive count refused", res[2])
	}
	if entryFields(t, rdb, dlq, bad) == nil || xlen(t, rdb, orders) != 2 {
		t.Error("a refused move wrote something")
	}
}

// The move script carries the stream's field names in its text: names that
// Lua would read as code, quotes or the end of a literal are only names.
func TestPublishFieldNamesInTheScript(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	odd := "it's \"the\" count\\n]]\n--\x00é"
	fpName := "fp'); redis.call('FLUSHALL"
	names := envelope.FieldNames{envelope.FieldRedriveCount: {odd}, envelope.FieldFingerprint: {fpName}}
	s := openStream(t, shared.URL(0, dlq), Options{Fields: names})
	fp := envelope.ComputeFingerprint([]byte("x"))
	a := xadd(t, rdb, dlq, "event_id", "E1", odd, "4", "payload", "x", fpName, fp)
	// The count's name twice: every one of them gets the new count, from
	// the last value, as when dlqctl decodes.
	b := xadd(t, rdb, dlq, "event_id", "E2", odd, "2", "payload", "x", odd, "6")
	c := xadd(t, rdb, dlq, "event_id", "E3", fpName, "sha256:other", "payload", "x")
	res, err := s.Publish(ctx, []backend.MoveItem{
		{Seq: 1, ID: a, Fingerprint: fp, Dest: orders},
		{Seq: 2, ID: b, Dest: orders},
		{Seq: 3, ID: c, Fingerprint: fp, Dest: orders},
	}, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"event_id", "E1", odd, "5", "payload", "x", fpName, fp, "dlqctl_run_id", "run-1", "dlqctl_seq", "1", "dlqctl_redriven_from", a},
		{"event_id", "E2", odd, "7", "payload", "x", odd, "7", "dlqctl_run_id", "run-1", "dlqctl_seq", "2", "dlqctl_redriven_from", b},
	}
	for i, w := range want {
		if res[i].Err != nil {
			t.Fatalf("item %d: %v", i, res[i].Err)
		}
		if got := entryFields(t, rdb, orders, res[i].DestID); !reflect.DeepEqual(got, w) {
			t.Errorf("moved entry %d:\n got %q\nwant %q", i, got, w)
		}
	}
	if !errors.Is(res[2].Err, backend.ErrChanged) || !strings.Contains(res[2].Err.Error(), "now sha256:other") {
		t.Errorf("item 3: %+v, want its changed fingerprint", res[2])
	}
	if xlen(t, rdb, dlq) != 1 || xlen(t, rdb, orders) != 2 {
		t.Errorf("DLQ %d, destination %d entries; want 1 and 2", xlen(t, rdb, dlq), xlen(t, rdb, orders))
	}
}
