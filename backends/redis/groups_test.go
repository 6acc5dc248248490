package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
)

// seedGroup makes a stream with a group "workers" whose pending entries
// have known consumers, idle times and delivery counts:
//
//	entry  consumer  deliveries  idle
//	0      c1        1           0
//	1      c1        1           0
//	2      c2        2           10m
//	3      c2        4           0
//	4      c3        7           20m
//	5      c3        12          0
//	6      -         acked
//	7      -         not yet read (lag 1)
func seedGroup(t *testing.T, stream string) []string {
	t.Helper()
	ctx := context.Background()
	rdb := shared.Client()
	var ids []string
	for range 7 {
		ids = append(ids, xadd(t, rdb, stream, "n", "x"))
	}
	if err := rdb.XGroupCreate(ctx, stream, "workers", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XGroupCreate(ctx, stream, "idle-group", "$").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "c1", Streams: []string{stream, ">"}, Count: 7}).Err(); err != nil {
		t.Fatal(err)
	}
	claim := func(id, consumer string, idle time.Duration, deliveries int) {
		t.Helper()
		err := rdb.Do(ctx, "XCLAIM", stream, "workers", consumer, 0, id,
			"IDLE", idle.Milliseconds(), "RETRYCOUNT", deliveries).Err()
		if err != nil {
			t.Fatalf("XCLAIM %s: %v", id, err)
		}
	}
	claim(ids[2], "c2", 10*time.Minute, 2)
	claim(ids[3], "c2", 0, 4)
	claim(ids[4], "c3", 20*time.Minute, 7)
	claim(ids[5], "c3", 0, 12)
	if err := rdb.XAck(ctx, stream, "workers", ids[6]).Err(); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, xadd(t, rdb, stream, "n", "late"))
	return ids
}

func TestPending(t *testing.T) {
	ctx := context.Background()
	origin := key(t, "orders")
	ids := seedGroup(t, origin)
	s := openStream(t, shared.URL(0, key(t, "dlq")), Options{})

	r, err := s.Pending(ctx, origin, "workers", 5*time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stream != origin || r.Group != "workers" || r.Pending != 6 || r.Sampled {
		t.Errorf("report head = %+v", r)
	}
	if r.Lag == nil || *r.Lag != 1 {
		t.Errorf("lag = %v, want 1", r.Lag)
	}
	if r.EntriesRead == nil || *r.EntriesRead != 7 {
		t.Errorf("entries_read = %v, want 7", r.EntriesRead)
	}
	if r.LastDeliveredID != ids[6] {
		t.Errorf("last_delivered_id = %s, want %s", r.LastDeliveredID, ids[6])
	}
	wantHist := Histogram{"1": 2, "2": 1, "3-5": 1, "6-10": 1, "11+": 1}
	if !reflect.DeepEqual(r.DeliveryHistogram, wantHist) {
		t.Errorf("histogram = %v, want %v", r.DeliveryHistogram, wantHist)
	}
	if r.OldestIdleSeconds < 1200 || r.OldestIdleSeconds > 1260 {
		t.Errorf("oldest idle = %ds, want about 1200", r.OldestIdleSeconds)
	}
	var names []string
	pending := map[string]int64{}
	for _, c := range r.Consumers {
		names = append(names, c.Name)
		pending[c.Name] = c.Pending
	}
	if !sort.StringsAreSorted(names) || !reflect.DeepEqual(pending, map[string]int64{"c1": 2, "c2": 2, "c3": 2}) {
		t.Errorf("consumers = %+v", r.Consumers)
	}
	if len(r.OverMinIdle) != 2 || r.OverMinIdle[0].ID != ids[2] || r.OverMinIdle[0].Consumer != "c2" || r.OverMinIdle[0].Deliveries != 2 ||
		r.OverMinIdle[1].ID != ids[4] || r.OverMinIdle[1].Consumer != "c3" || r.OverMinIdle[1].Deliveries != 7 ||
		r.OverMinIdle[0].IdleSeconds < 600 {
		t.Errorf("over_min_idle = %+v", r.OverMinIdle)
	}

	// Bounded: the first 4 entries only, and it says so.
	r, err = s.Pending(ctx, origin, "workers", 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Sampled || r.Pending != 6 || len(r.OverMinIdle) != 4 {
		t.Errorf("limit 4: sampled %v pending %d over_min_idle %d", r.Sampled, r.Pending, len(r.OverMinIdle))
	}
	if !reflect.DeepEqual(r.DeliveryHistogram, Histogram{"1": 2, "2": 1, "3-5": 1, "6-10": 0, "11+": 0}) {
		t.Errorf("limit 4: histogram %v", r.DeliveryHistogram)
	}
	// Exactly the limit: not sampled.
	if r, err := s.Pending(ctx, origin, "workers", 0, 6); err != nil || r.Sampled {
		t.Errorf("limit 6 of 6: sampled %v, %v", r.Sampled, err)
	}

	// A group with nothing pending.
	r, err = s.Pending(ctx, origin, "idle-group", time.Minute, 0)
	if err != nil || r.Pending != 0 || len(r.Consumers) != 0 || r.OldestIdleSeconds != 0 {
		t.Errorf("idle group: %+v, %v", r, err)
	}

	for _, c := range []struct{ stream, group, msg string }{
		{origin, "nope", `no group "nope" on stream "` + origin + `"`},
		{"no-such-stream", "workers", `no group "workers" on stream "no-such-stream"`},
	} {
		_, err := s.Pending(ctx, c.stream, c.group, 0, 0)
		if !errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Pending(%s, %s) = %v, want ErrNotFound saying %s", c.stream, c.group, err, c.msg)
		}
	}
}

func TestPendingJSONFields(t *testing.T) {
	origin := key(t, "orders")
	seedGroup(t, origin)
	s := openStream(t, shared.URL(0, key(t, "dlq")), Options{})
	r, err := s.Pending(context.Background(), origin, "workers", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// SPEC §9 dlqctl.pending/v1, and the fields this backend adds.
	for _, f := range []string{"stream", "group", "pending", "oldest_idle_seconds", "lag", "consumers", "delivery_histogram",
		"entries_read", "over_min_idle", "sampled"} {
		if _, ok := doc[f]; !ok {
			t.Errorf("pending JSON lacks %q: %s", f, b)
		}
	}
	c := doc["consumers"].([]any)[0].(map[string]any)
	for _, f := range []string{"name", "pending", "idle_seconds"} {
		if _, ok := c[f]; !ok {
			t.Errorf("consumer JSON lacks %q: %v", f, c)
		}
	}
	o := doc["over_min_idle"].([]any)[0].(map[string]any)
	for _, f := range []string{"id", "consumer", "idle_seconds", "deliveries"} {
		if _, ok := o[f]; !ok {
			t.Errorf("over_min_idle JSON lacks %q: %v", f, o)
		}
	}

	// An unknown lag is left out, not reported as 0.
	r.Lag = nil
	b, _ = json.Marshal(r)
	if strings.Contains(string(b), `"lag"`) {
		t.Errorf("nil lag marshalled: %s", b)
	}
}

func TestExtras(t *testing.T) {
	ctx := context.Background()
	origin := key(t, "orders")
	seedGroup(t, origin)
	str := key(t, "a-string")
	shared.Client().Set(ctx, str, "x", 0)
	s := openStream(t, shared.URL(0, key(t, "dlq")), Options{})

	x, err := s.Extras(ctx, []string{origin, "", origin, key(t, "missing"), str})
	if err != nil {
		t.Fatal(err)
	}
	doc, ok := x.JSON.(RedisExtras)
	if !ok {
		t.Fatalf("JSON is %T", x.JSON)
	}
	if len(doc.Groups) != 2 || doc.Groups[0].Group != "idle-group" || doc.Groups[1].Group != "workers" {
		t.Fatalf("groups = %+v", doc.Groups)
	}
	w := doc.Groups[1]
	if w.Stream != origin || w.Pending != 6 || w.Lag == nil || *w.Lag != 1 || w.OldestIdleSeconds < 1200 || w.Sampled ||
		!reflect.DeepEqual(w.DeliveryHistogram, Histogram{"1": 2, "2": 1, "3-5": 1, "6-10": 1, "11+": 1}) {
		t.Errorf("workers = %+v", w)
	}
	if len(x.Rows) != 2 || !strings.Contains(x.Rows[1][1], "pending 6") || !strings.Contains(x.Rows[1][1], "lag 1") || x.Title == "" {
		t.Errorf("rows = %q, title %q", x.Rows, x.Title)
	}
	b, _ := json.Marshal(x.JSON)
	for _, f := range []string{`"groups"`, `"stream"`, `"group"`, `"pending"`, `"lag"`, `"entries_read"`, `"oldest_idle_seconds"`, `"delivery_histogram"`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("extras JSON lacks %s: %s", f, b)
		}
	}

	x, err = s.Extras(ctx, nil)
	if err != nil || len(x.JSON.(RedisExtras).Groups) != 0 || len(x.Rows) != 1 {
		t.Errorf("no origins: %+v, %v", x, err)
	}
	if b, _ := json.Marshal(x.JSON); string(b) != `{"groups":[]}` {
		t.Errorf("no origins JSON = %s", b)
	}
}
