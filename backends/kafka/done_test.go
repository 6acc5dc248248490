package kafkadlq

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fillDone is a done-set of n entries over 4 partitions, in the order a
// redrive writes them.
func fillDone(n int) *doneSet {
	d := newDoneSet("T1")
	for i := range n {
		d.set(KafkaID(int32(i%4), int64(i/4)), stateRecord{Status: StatusRedriven, TopicID: "T1"})
	}
	return d
}

func TestDoneSetCounts(t *testing.T) {
	d := fillDone(1000) // offsets 0..249 in each partition
	if got := d.countIn(1, 10, 20); got != 10 {
		t.Fatalf("countIn(1, 10, 20) = %d", got)
	}
	if got := d.countIn(0, 240, 400); got != 10 {
		t.Fatalf("countIn past the end = %d", got)
	}
	d.set(KafkaID(1, 16), stateRecord{Status: StatusResolved, TopicID: "T1"}) // again: counted once
	d.set(KafkaID(1, 17), stateRecord{Status: StatusRedriven, TopicID: "T0"}) // another topic's
	d.set(KafkaID(1, 300), stateRecord{Status: StatusRedriven})               // from before topic IDs
	if got := d.countIn(1, 10, 20); got != 9 {
		t.Fatalf("after another topic's record: %d", got)
	}
	if got := d.countIn(1, 250, 301); got != 1 {
		t.Fatalf("a record without topic ID: %d", got)
	}
	// Counting allocates nothing and looks at no entry one by one, however
	// many there are: Len's cost per batch does not grow with the run.
	big := fillDone(250_000)
	if a := testing.AllocsPerRun(100, func() { big.countIn(2, 1000, 60_000) }); a != 0 {
		t.Fatalf("countIn allocates %v times", a)
	}
}

// BenchmarkDoneCount is Len's work past the broker requests, at the
// start and at the end of a 250,000-entry redrive: it stays flat (it was
// a copy and parse of every entry, 29 ms per batch at the start and
// 138 ms at the end).
func BenchmarkDoneCount(b *testing.B) {
	for _, n := range []int{1_000, 250_000} {
		d := fillDone(n)
		b.Run(fmt.Sprintf("done=%d", n), func(b *testing.B) {
			for b.Loop() {
				for p := range int32(4) {
					d.countIn(p, 0, 1<<40)
				}
			}
		})
	}
}

// doneRecord is a state record as a redrive or resolve writes it, made
// from n.
func doneRecord(rng *rand.Rand, topicIDs []string) stateRecord {
	r := stateRecord{Status: StatusRedriven, RunID: "run-" + strconv.Itoa(rng.IntN(5)), Seq: rng.Int64N(1 << 20),
		EventID: "evt-" + strconv.Itoa(rng.IntN(1e6)), Dest: "orders" + strconv.Itoa(rng.IntN(3)),
		DestID: KafkaID(int32(rng.IntN(6)), rng.Int64N(1<<30)), TopicID: topicIDs[rng.IntN(len(topicIDs))],
		At: time.Unix(1_700_000_000+rng.Int64N(1e6), rng.Int64N(1e9)).UTC(), RecordTS: rng.Int64N(2) * (1_700_000_000_000 + rng.Int64N(1e9))}
	if rng.IntN(3) == 0 {
		r.Status, r.Dest, r.DestID = StatusResolved, "", ""
	}
	if rng.IntN(2) == 0 {
		r.Fingerprint = "sha256:" + strconv.Itoa(rng.IntN(1e9))
	}
	return r
}

// FuzzDoneSet holds the compact done-set equal to the plain map of state
// records it replaced: every record as it was set (but the event ID it
// does not keep, and a fingerprint only where there is no record
// timestamp), counts and the first remaining offset of any range.
func FuzzDoneSet(f *testing.F) {
	f.Add(uint64(1), uint16(50))
	f.Add(uint64(34), uint16(2000))
	f.Fuzz(func(t *testing.T, seed uint64, n uint16) {
		rng := rand.New(rand.NewPCG(seed, 7))
		topicIDs := []string{"T1", "T1", "T1", "", "T0"}
		d := newDoneSet("T1")
		want := map[string]stateRecord{}
		for range int(n) {
			p, o := int32(rng.IntN(3)), rng.Int64N(200)
			if rng.IntN(4) > 0 {
				o = int64(len(want)) // mostly in order, as a redrive writes
			}
			id, r := KafkaID(p, o), doneRecord(rng, topicIDs)
			d.set(id, r)
			r.EventID = ""
			if r.RecordTS != 0 {
				r.Fingerprint = ""
			}
			want[id] = r
		}
		for id, w := range want {
			got, ok := d.get(id)
			if !ok || !reflect.DeepEqual(got, w) {
				t.Fatalf("get(%s) = %+v, %v; want %+v", id, got, ok, w)
			}
			p, o, _ := ParseKafkaID(id)
			lite, ok := d.getAt(p, o)
			if !ok || lite.Status != w.Status || lite.TopicID != w.TopicID || lite.RecordTS != w.RecordTS || lite.Fingerprint != w.Fingerprint {
				t.Fatalf("getAt(%s) = %+v; want %+v", id, lite, w)
			}
		}
		if _, ok := d.get(KafkaID(9, 1)); ok {
			t.Fatal("an entry never set is found")
		}
		if ids := d.ids(); len(ids) != len(want) {
			t.Fatalf("%d ids, want %d", len(ids), len(want))
		}
		counted := func(p int32, o int64) bool {
			r, ok := want[KafkaID(p, o)]
			return ok && (r.TopicID == "" || r.TopicID == "T1")
		}
		for range 50 {
			p, from := int32(rng.IntN(4)), rng.Int64N(int64(n)+10)
			to := from + rng.Int64N(int64(n)+10)
			var c int64
			first := int64(-1)
			for o := from; o < to; o++ {
				if counted(p, o) {
					c++
				} else if first < 0 {
					first = o
				}
			}
			if got := d.countIn(p, from, to); got != c {
				t.Fatalf("countIn(%d, %d, %d) = %d, want %d", p, from, to, got, c)
			}
			if got := d.firstRemaining(p, from, to); got != first {
				t.Fatalf("firstRemaining(%d, %d, %d) = %d, want %d", p, from, to, got, first)
			}
		}
	})
}

// TestDoneSetMemory: a state topic of many records is held in a few
// dozen bytes per entry (a map of state records took some 500).
func TestDoneSetMemory(t *testing.T) {
	const n = 200_000
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]stateRecord, 1000)
	for i := range recs {
		recs[i] = doneRecord(rng, []string{"T1"})
		recs[i].RecordTS = 1_700_000_000_000 + int64(i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := newDoneSet("T1")
	for i := range n {
		r := recs[i%len(recs)]
		// Strings of their own per record, as json.Unmarshal makes them.
		r.RunID, r.Dest, r.DestID, r.EventID = strings.Clone(r.RunID), strings.Clone(r.Dest), KafkaID(2, int64(i)), "evt-"+strconv.Itoa(i)
		d.set(KafkaID(int32(i%4), int64(i/4)), r)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	runtime.KeepAlive(d)
	if per > 80 {
		t.Fatalf("%.0f bytes per entry held; want at most 80", per)
	}
	t.Logf("%.0f bytes per entry", per)
}
