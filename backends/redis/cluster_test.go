package redisstream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
)

func TestParseClusterURL(t *testing.T) {
	u, err := parseURL("redis://10.0.0.1:7000/0?stream=dlq&cluster=true")
	if err != nil || !u.cluster || u.addr() != "10.0.0.1:7000" {
		t.Fatalf("parse = %+v, %v", u, err)
	}
	if u, err := parseURL("rediss://h:7000?stream=dlq&cluster=1"); err != nil || !u.cluster {
		t.Fatalf("rediss parse = %+v, %v", u, err)
	}
	if u, err := parseURL("redis://h/3?stream=dlq&cluster=false"); err != nil || u.cluster || u.db != 3 {
		t.Fatalf("cluster=false parse = %+v, %v", u, err)
	}
	for raw, want := range map[string]string{
		"redis://h/2?stream=dlq&cluster=true": "only database 0",
		"redis://h/0?stream=dlq&cluster=yes":  "want true or false",
	} {
		_, err := parseURL(raw)
		var ce *backend.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("parseURL(%s) = %v, want a config error with %q", raw, err, want)
		}
	}
}

// clusterEntries seeds n envelopes with a fingerprint field into dlq.
func clusterEntries(t *testing.T, rdb redis.UniversalClient, dlq string, n int) []string {
	t.Helper()
	var ids []string
	for i := 1; i <= n; i++ {
		id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: dlq, Values: []string{
			"event_id", fmt.Sprintf("E%03d", i), "fingerprint", fmt.Sprintf("sha256:%03d", i),
			"key", fmt.Sprintf("k%d", i%3), "payload", fmt.Sprintf(`{"n":%d}`, i), "redrive_count", "1",
		}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func clusterPairs(t *testing.T, rdb redis.UniversalClient, stream, id string) []string {
	t.Helper()
	reply, err := rdb.Do(context.Background(), "XRANGE", stream, id, id).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(reply) == 0 {
		return nil
	}
	var out []string
	for _, v := range reply[0].([]any)[1].([]any) {
		out = append(out, v.(string))
	}
	return out
}

func clusterLen(t *testing.T, rdb redis.UniversalClient, stream string) int64 {
	t.Helper()
	n, err := rdb.XLen(context.Background(), stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventCounts is how many entries of stream carry each event ID.
func eventCounts(t *testing.T, rdb redis.UniversalClient, stream string) map[string]int {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range msgs {
		out[fmt.Sprint(m.Values["event_id"])]++
	}
	return out
}

func crossSlotKeys(t *testing.T, prefix string) (dlq, dest string) {
	t.Helper()
	dlq, dest = prefix+":dlq", prefix+":orders"
	if keySlot(dlq) == keySlot(dest) {
		t.Fatalf("%s and %s share slot %d: pick other names", dlq, dest, keySlot(dlq))
	}
	return dlq, dest
}

type clusterCrash struct{}

// TestCluster runs against one real 3-master Redis Cluster.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	runID := redrive.NewRunID(time.Now(), "abcd")
	markers := backend.Markers{RunID: runID}

	t.Run("ScanLenGet", func(t *testing.T) {
		ids := clusterEntries(t, rdb, "scan:dlq", 5)
		s := openStream(t, c.URL("scan:dlq"), Options{PageSize: 2})
		if !s.Cluster() || s.Atomic() {
			t.Errorf("Cluster() = %v, Atomic() = %v on a cluster", s.Cluster(), s.Atomic())
		}
		var got []string
		if err := s.Scan(ctx, "", func(e envelope.Envelope) error { got = append(got, e.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, ids) {
			t.Errorf("scan = %v, want %v", got, ids)
		}
		// The scan read its pages the fast way (xrange.go), not the
		// plain way it falls back to.
		pg := &pager{s: s}
		if n, err := pg.next(ctx, "-", "+", 10); err != nil || n != 5 || pg.plain != nil {
			t.Errorf("pager on a cluster: %d entries, %v, fell back to the plain reader: %v", n, err, pg.plain != nil)
		}
		if n, err := s.Len(ctx); err != nil || n != 5 {
			t.Errorf("Len = %d, %v", n, err)
		}
		e, err := s.Get(ctx, ids[2])
		if err != nil || e.EventID != "E003" || e.Fingerprint != "sha256:003" {
			t.Errorf("Get = %+v, %v", e, err)
		}
		if tail, err := s.Tail(ctx); err != nil || tail != ids[4] {
			t.Errorf("Tail = %q, %v", tail, err)
		}
		if n, tail, err := s.LenTail(ctx); err != nil || n != 5 || tail != ids[4] {
			t.Errorf("LenTail = %d, %q, %v", n, tail, err)
		}
	})

	t.Run("ExtrasAndImport", func(t *testing.T) {
		if err := rdb.XGroupCreateMkStream(ctx, "ex:orders", "workers", "0").Err(); err != nil {
			t.Fatal(err)
		}
		s := openStream(t, c.URL("ex:dlq"), Options{})
		if _, err := s.Extras(ctx, []string{"ex:orders"}); err != nil {
			t.Errorf("Extras: %v", err)
		}
		src := openStream(t, c.URL("scan:dlq"), Options{})
		e, err := src.Get(ctx, clusterEntries(t, rdb, "scan:dlq", 1)[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Import(ctx, e); err != nil {
			t.Fatalf("Import: %v", err)
		}
		if n, err := s.Len(ctx); err != nil || n != 1 {
			t.Errorf("Len after Import = %d, %v", n, err)
		}
	})

	t.Run("SameSlotIsAtomic", func(t *testing.T) {
		dlq, dest := "{q}dlq", "{q}orders"
		ids := clusterEntries(t, rdb, dlq, 1)
		s := openStream(t, c.URL(dlq), Options{})
		if s.CrossSlot(dest) {
			t.Fatal("CrossSlot of two keys with one hash tag")
		}
		res, err := s.Publish(ctx, []backend.MoveItem{{Seq: 1, ID: ids[0], Fingerprint: "sha256:001", Dest: dest}}, markers)
		if err != nil || res[0].Err != nil || !res[0].Removed || res[0].DestID == "" {
			t.Fatalf("Publish = %+v, %v", res, err)
		}
		if clusterPairs(t, rdb, dlq, ids[0]) != nil {
			t.Error("the entry is still in the DLQ")
		}
		got := clusterPairs(t, rdb, dest, res[0].DestID)
		if !strings.Contains(strings.Join(got, " "), "redrive_count 2 dlqctl_run_id "+runID+" dlqctl_seq 1") {
			t.Errorf("destination entry = %v", got)
		}
		// A resend after an unknown outcome finds this run's copy.
		again, err := s.Publish(ctx, []backend.MoveItem{{Seq: 1, ID: ids[0], Fingerprint: "sha256:001", Dest: dest}}, markers)
		if err != nil || again[0].Err != nil || !again[0].Removed || again[0].DestID != res[0].DestID {
			t.Errorf("resend = %+v, %v: want the first move's %s", again, err, res[0].DestID)
		}
		if n := clusterLen(t, rdb, dest); n != 1 {
			t.Errorf("destination holds %d entries, want 1", n)
		}
	})

	t.Run("CrossSlotTwoStep", func(t *testing.T) {
		dlq, dest := crossSlotKeys(t, "x")
		ids := clusterEntries(t, rdb, dlq, 2)
		s := openStream(t, c.URL(dlq), Options{})
		if !s.CrossSlot(dest) {
			t.Fatal("CrossSlot = false for keys in different slots")
		}
		items := []backend.MoveItem{
			{Seq: 1, ID: ids[0], Fingerprint: "SHA256:001", Dest: dest},
			{Seq: 2, ID: ids[1], Fingerprint: "sha256:other", Dest: dest},
		}
		res, err := s.Publish(ctx, items, markers)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || res[0].Removed || res[0].DestID == "" {
			t.Fatalf("step 1 = %+v", res[0])
		}
		if !errors.Is(res[1].Err, backend.ErrChanged) {
			t.Errorf("changed fingerprint = %+v, want ErrChanged", res[1])
		}
		want := []string{"event_id", "E001", "fingerprint", "sha256:001", "key", "k1", "payload", `{"n":1}`, "redrive_count", "2",
			"dlqctl_run_id", runID, "dlqctl_seq", "1", "dlqctl_redriven_from", ids[0]}
		if got := clusterPairs(t, rdb, dest, res[0].DestID); !reflect.DeepEqual(got, want) {
			t.Errorf("destination entry =\n%q\nwant\n%q", got, want)
		}
		if clusterPairs(t, rdb, dlq, ids[0]) == nil {
			t.Fatal("step 1 removed the DLQ entry")
		}
		if n := clusterLen(t, rdb, dest); n != 1 {
			t.Errorf("destination holds %d entries, want 1", n)
		}
		rm, err := s.Remove(ctx, items[:1])
		if err != nil || rm[0].Err != nil || !rm[0].Removed {
			t.Fatalf("Remove = %+v, %v", rm, err)
		}
		if clusterPairs(t, rdb, dlq, ids[0]) != nil {
			t.Error("Remove left the entry in the DLQ")
		}
		rm, err = s.Remove(ctx, items[:1])
		if err != nil || !errors.Is(rm[0].Err, backend.ErrNotFound) {
			t.Errorf("second Remove = %+v, %v: want ErrNotFound", rm, err)
		}
		// A resend after the remove: this run's copy is found, nothing added.
		res, err = s.Publish(ctx, items[:1], markers)
		if err != nil || res[0].Err != nil || res[0].DestID == "" {
			t.Errorf("Publish after Remove = %+v, %v", res, err)
		}
		if n := clusterLen(t, rdb, dest); n != 1 {
			t.Errorf("destination holds %d entries after a resend, want 1", n)
		}
	})

	t.Run("CrossSlotWithGroupAcks", func(t *testing.T) {
		dlq, dest := crossSlotKeys(t, "g")
		ids := clusterEntries(t, rdb, dlq, 1)
		if err := rdb.XGroupCreate(ctx, dlq, "dlq-readers", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "dlq-readers", Consumer: "c", Streams: []string{dlq, ">"}}).Err(); err != nil {
			t.Fatal(err)
		}
		s := openStream(t, c.URL(dlq)+"&group=dlq-readers", Options{})
		items := []backend.MoveItem{{Seq: 1, ID: ids[0], Fingerprint: "sha256:001", Dest: dest}}
		if res, err := s.Publish(ctx, items, markers); err != nil || res[0].Err != nil {
			t.Fatalf("Publish = %+v, %v", res, err)
		}
		if rm, err := s.Remove(ctx, items); err != nil || rm[0].Err != nil {
			t.Fatalf("Remove = %+v, %v", rm, err)
		}
		if p, err := rdb.XPending(ctx, dlq, "dlq-readers").Result(); err != nil || p.Count != 0 {
			t.Errorf("pending after Remove = %+v, %v", p, err)
		}
	})

	t.Run("PublishTwiceAddsOne", func(t *testing.T) {
		dlq, dest := crossSlotKeys(t, "twice")
		ids := clusterEntries(t, rdb, dlq, 1)
		// Other traffic on the destination in between.
		clusterEntries(t, rdb, dest, 3)
		s := openStream(t, c.URL(dlq), Options{})
		items := []backend.MoveItem{{Seq: 7, ID: ids[0], Fingerprint: "sha256:001", Dest: dest}}
		first, err := s.Publish(ctx, items, markers)
		if err != nil || first[0].Err != nil {
			t.Fatalf("Publish = %+v, %v", first, err)
		}
		clusterEntries(t, rdb, dest, 3)
		again, err := s.Publish(ctx, items, markers)
		if err != nil || again[0].Err != nil {
			t.Fatalf("second Publish = %+v, %v", again, err)
		}
		if again[0].DestID != first[0].DestID {
			t.Errorf("second Publish answered %s, want the first copy %s", again[0].DestID, first[0].DestID)
		}
		if n := clusterLen(t, rdb, dest); n != 7 {
			t.Errorf("destination holds %d entries, want 3+1+3", n)
		}
		// Another run is another move.
		other, err := s.Publish(ctx, items, backend.Markers{RunID: redrive.NewRunID(time.Now(), "efgh")})
		if err != nil || other[0].Err != nil || other[0].DestID == first[0].DestID {
			t.Errorf("Publish for another run = %+v, %v: want a new entry", other, err)
		}
	})

	t.Run("EngineMovesAllOnce", func(t *testing.T) {
		dlq, dest := crossSlotKeys(t, "eng")
		s := openStream(t, c.URL(dlq), Options{})
		p := clusterPlan(t, rdb, dlq, dest, 30)
		journal := filepath.Join(t.TempDir(), "journal")
		eng := clusterEngine(t, s, journal, redrive.CreateJournal)
		st, err := eng.Start(runID+"-eng", p, "p", s.String(), "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Run(ctx, st); err != nil || st.Status != redrive.StatusCompleted {
			t.Fatalf("Run = %v, status %s %s", err, st.Status, st.HaltedBy)
		}
		checkMovedOnce(t, rdb, dlq, dest, 30)
		if moved, _, _, failed := st.Counts(); moved != 30 || failed != 0 {
			t.Errorf("counts moved=%d failed=%d", moved, failed)
		}
	})

	t.Run("CrashAfterStepOneThenResume", func(t *testing.T) {
		dlq, dest := crossSlotKeys(t, "crash")
		s := openStream(t, c.URL(dlq), Options{})
		p := clusterPlan(t, rdb, dlq, dest, 30)
		journal := filepath.Join(t.TempDir(), "journal")
		eng := clusterEngine(t, s, journal, redrive.CreateJournal)
		eng.Chunk = 4
		intents := 0
		eng.Crash = func(step string) {
			if step == redrive.RecIntent {
				if intents++; intents == 2 {
					panic(clusterCrash{})
				}
			}
		}
		st, err := eng.Start(runID+"-crash", p, "p", s.String(), "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(clusterCrash); !ok {
						panic(r)
					}
				}
			}()
			_ = eng.Run(ctx, st)
			t.Fatal("the run did not reach the crash point")
		}()
		// The crash came after the second chunk's intents were synced and
		// "during" its publish: step 1 ran, the journal never heard back.
		recs, err := redrive.ReadJournal(journal)
		if err != nil {
			t.Fatal(err)
		}
		st = redrive.Replay(p, recs)
		var open []backend.MoveItem
		for en := range p.Entries.All() {
			if st.Step(en.Seq) == redrive.RecIntent {
				open = append(open, backend.MoveItem{Seq: en.Seq, ID: en.ID, EventID: en.EventID, Fingerprint: en.Fingerprint, Dest: en.Dest})
			}
		}
		if len(open) != 4 {
			t.Fatalf("%d entries with an intent only, want the 4 of the second chunk", len(open))
		}
		if res, err := s.Publish(ctx, open, backend.Markers{RunID: st.RunID}); err != nil || res[0].Err != nil {
			t.Fatalf("step 1 before the crash: %+v, %v", res, err)
		}
		eng2 := clusterEngine(t, s, journal, redrive.OpenJournal)
		if err := eng2.Resume(st, "t", nil); err != nil {
			t.Fatal(err)
		}
		if err := eng2.Run(ctx, st); err != nil || st.Status != redrive.StatusCompleted {
			t.Fatalf("resumed Run = %v, status %s %s", err, st.Status, st.HaltedBy)
		}
		checkMovedOnce(t, rdb, dlq, dest, 30)
		recs, _ = redrive.ReadJournal(journal)
		// Step 1 had landed: resume finds each entry on the destination by
		// the run's markers (PublishedChecker) and only removes it, rather
		// than sending it again as ambiguous.
		ambiguous, found := 0, 0
		for _, r := range recs {
			switch {
			case r.Type == redrive.RecAmbiguous:
				ambiguous++
			case r.Type == redrive.RecPublished && strings.Contains(r.Note, "found on the destination"):
				found++
			}
		}
		if ambiguous != 0 || found != 4 {
			t.Errorf("%d ambiguous records and %d found on the destination, want 0 and 4", ambiguous, found)
		}
	})
}

// clusterPlan seeds n entries in dlq and plans their move to dest.
func clusterPlan(t *testing.T, rdb redis.UniversalClient, dlq, dest string, n int) *redrive.Plan {
	t.Helper()
	ids := clusterEntries(t, rdb, dlq, n)
	p := &redrive.Plan{Schema: redrive.PlanSchema, Kind: redrive.KindRedrive, Reason: "test", PlannedBy: "t", Source: dlq,
		Params: redrive.Params{Ramp: []int{10}, UnverifiedOK: true}}
	for i, id := range ids {
		p.Entries.Append(redrive.Entry{Seq: int64(i + 1), ID: id, EventID: fmt.Sprintf("E%03d", i+1),
			Fingerprint: fmt.Sprintf("sha256:%03d", i+1), Key: fmt.Sprintf("k%d", (i+1)%3), Dest: dest})
	}
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	return p
}

func clusterEngine(t *testing.T, s *Stream, journal string, open func(string, func() time.Time) (*redrive.Journal, error)) *redrive.Engine {
	t.Helper()
	j, err := open(journal, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return &redrive.Engine{Source: s, Mover: s, Journal: j, Now: time.Now,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
}

// checkMovedOnce: the DLQ is empty and dest holds each of the n events
// exactly once.
func checkMovedOnce(t *testing.T, rdb redis.UniversalClient, dlq, dest string, n int) {
	t.Helper()
	if left := clusterLen(t, rdb, dlq); left != 0 {
		t.Errorf("%d entries left in the DLQ", left)
	}
	counts := eventCounts(t, rdb, dest)
	if len(counts) != n {
		t.Errorf("destination holds %d distinct events, want %d", len(counts), n)
	}
	for id, c := range counts {
		if c != 1 {
			t.Errorf("%s is %d times in the destination", id, c)
		}
	}
}
