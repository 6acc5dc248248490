package redisstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/envelope"
)

// idFP is one answer of ScanFingerprints.
type idFP struct{ id, fp string }

// scanFingerprints is what ScanFingerprints answered, in stream order (it
// may answer in another), checking that no entry came twice.
func scanFingerprints(t *testing.T, s *Stream) []idFP {
	t.Helper()
	var out []idFP
	seen := map[string]bool{}
	if err := s.ScanFingerprints(context.Background(), func(id, fp string) error {
		if seen[id] {
			t.Errorf("entry %s answered twice", id)
		}
		seen[id] = true
		out = append(out, idFP{id, fp})
		return nil
	}); err != nil {
		t.Fatalf("ScanFingerprints: %v", err)
	}
	slices.SortFunc(out, func(a, b idFP) int { return compareIDs(a.id, b.id) })
	return out
}

// compareIDs orders stream ids as the stream does.
func compareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	ai, _ := strconv.ParseUint(am, 10, 64)
	bi, _ := strconv.ParseUint(bm, 10, 64)
	if c := cmp.Compare(ai, bi); c != 0 {
		return c
	}
	aj, _ := strconv.ParseUint(as, 10, 64)
	bj, _ := strconv.ParseUint(bs, 10, 64)
	return cmp.Compare(aj, bj)
}

// fingerprintsByFullRead is what ScanFingerprints answered when it read
// every field of every entry (before the server picked the fingerprint):
// the first name with a non-empty value, else the full decode's.
func fingerprintsByFullRead(t *testing.T, s *Stream) []idFP {
	t.Helper()
	msgs, err := s.rdb.XRange(context.Background(), s.key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []idFP
	for _, m := range msgs {
		fp := ""
		for _, n := range s.names[envelope.FieldFingerprint] {
			if v, ok := m.Values[n].(string); ok && v != "" {
				fp = v
				break
			}
		}
		if fp == "" {
			fp = s.decode(m).Fingerprint
		}
		out = append(out, idFP{m.ID, fp})
	}
	return out
}

func TestScanFingerprints(t *testing.T) {
	k := key(t, "dlq")
	rdb := shared.Client()
	carried := "sha256:" + fmt.Sprintf("%064x", 7)
	xadd(t, rdb, k, "event_id", "E1", "fingerprint", carried, "payload", `{"a":1}`)
	xadd(t, rdb, k, "event_id", "E2", "payload", `{"b":2}`) // none carried: computed
	xadd(t, rdb, k, "event_id", "E3", "fingerprint", "", "payload", `{"c":3}`)
	xadd(t, rdb, k, "event_id", "E4", "fp", "sha256:ALIAS", "payload", `{}`)
	xadd(t, rdb, k, "event_id", "E5", "fingerprint", "sha256:First", "fingerprint", "sha256:second", "payload", `{}`)
	xadd(t, rdb, k, "event_id", "E6", "fp", "sha256:alias-loses", "fingerprint", "SHA256:Upper", "payload", `{}`)
	xadd(t, rdb, k, "event_id", "E7", "payload", "\xff\xfe not utf-8")
	xadd(t, rdb, k, "event_id", "E8") // no payload: malformed, still listed
	names := envelope.FieldNames{envelope.FieldFingerprint: {"fingerprint", "fp"}}
	for _, pageSize := range []int{1, 3, 4, 8, 1000} {
		t.Run(fmt.Sprintf("page%d", pageSize), func(t *testing.T) {
			s := openStream(t, shared.URL(0, k), Options{PageSize: pageSize, Fields: names})
			got, want := scanFingerprints(t, s), fingerprintsByFullRead(t, s)
			if len(got) != 8 || !reflect.DeepEqual(got, want) {
				t.Fatalf("ScanFingerprints =\n%v\nwant (a full read of every entry)\n%v", got, want)
			}
		})
	}
	s := openStream(t, shared.URL(0, k), Options{PageSize: 3, Fields: names})
	got := scanFingerprints(t, s)
	if got[0].fp != carried || got[1].fp != envelope.ComputeFingerprint([]byte(`{"b":2}`)) ||
		got[3].fp != "sha256:ALIAS" || got[4].fp != "sha256:second" || got[5].fp != "SHA256:Upper" {
		t.Errorf("fingerprints = %v", got)
	}

	// With the default names only "fingerprint" counts; fp is another field.
	def := openStream(t, shared.URL(0, k), Options{PageSize: 3})
	if got, want := scanFingerprints(t, def), fingerprintsByFullRead(t, def); !reflect.DeepEqual(got, want) {
		t.Errorf("default names: %v, want %v", got, want)
	}

	// fn is never called again once it failed, whichever half calls next:
	// tried many times, since the halves race.
	boom := errors.New("boom")
	for range 50 {
		n := 0
		err := s.ScanFingerprints(context.Background(), func(string, string) error {
			if n++; n == 5 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) || n != 5 {
			t.Fatalf("fn error at 5: %v after %d, want boom after 5", err, n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.ScanFingerprints(ctx, func(string, string) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}

	empty := openStream(t, shared.URL(0, key(t, "none")), Options{})
	if got := scanFingerprints(t, empty); len(got) != 0 {
		t.Errorf("missing stream: %v", got)
	}
}

// Read in two halves at once: every entry once, whatever the halves'
// sizes and pages, the ones at the split millisecond included; fn never
// runs on two goroutines at a time; an error of fn stops both halves.
func TestScanFingerprintsInHalves(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	k := key(t, "dlq")
	rdb := shared.Client()
	// Ids 1000-0 … 1000-4, 1500-0 … (the split is at 1501-0), 2000-0 ….
	var ms []int
	for range 5 {
		ms = append(ms, 1000)
	}
	for range 7 {
		ms = append(ms, 1500)
	}
	ms = append(ms, 1501, 1501, 1700, 2000, 2000, 2000)
	seq := map[int]int{}
	for i, m := range ms {
		id := fmt.Sprintf("%d-%d", m, seq[m])
		seq[m]++
		if _, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: k, ID: id, Values: []string{"event_id", fmt.Sprint("E", i), "fingerprint", fmt.Sprint("sha256:", i), "payload", "{}"}}).Result(); err != nil {
			t.Fatal(err)
		}
	}
	for _, pageSize := range []int{1, 2, 5, 1000} {
		s := openStream(t, shared.URL(0, k), Options{PageSize: pageSize})
		if r, err := s.halves(context.Background()); err != nil || len(r) != 2 || r[1].start != "1501-0" {
			t.Fatalf("halves = %v, %v; want two, the second from 1501-0", r, err)
		}
		var busy atomic.Int32
		got := map[string]string{}
		err := s.ScanFingerprints(context.Background(), func(id, fp string) error {
			if busy.Add(1) != 1 {
				t.Error("fn ran on two goroutines at once")
			}
			defer busy.Add(-1)
			if _, dup := got[id]; dup {
				t.Errorf("entry %s answered twice", id)
			}
			got[id] = fp
			return nil
		})
		if err != nil || len(got) != len(ms) {
			t.Fatalf("page %d: %d entries answered, %v; want %d", pageSize, len(got), err, len(ms))
		}
		if got["1501-0"] != "sha256:12" || got["1000-0"] != "sha256:0" || got["2000-2"] != "sha256:17" {
			t.Errorf("page %d: fingerprints %v", pageSize, got)
		}
		boom := errors.New("boom")
		n := 0
		if err := s.ScanFingerprints(context.Background(), func(string, string) error {
			if n++; n == 3 {
				return boom
			}
			return nil
		}); !errors.Is(err, boom) {
			t.Errorf("page %d: fn error: %v, want boom", pageSize, err)
		}
	}

	// One CPU: the whole stream in one range.
	runtime.GOMAXPROCS(1)
	s := openStream(t, shared.URL(0, k), Options{})
	if r, err := s.halves(context.Background()); err != nil || len(r) != 1 {
		t.Errorf("one CPU: halves = %v, %v; want the whole stream", r, err)
	}
	runtime.GOMAXPROCS(2)
	single := key(t, "single")
	xadd(t, rdb, single, "event_id", "E", "payload", "{}")
	one := openStream(t, shared.URL(0, single), Options{})
	if r, err := one.halves(context.Background()); err != nil || len(r) != 1 {
		t.Errorf("one entry: halves = %v, %v; want the whole stream", r, err)
	}
	empty := openStream(t, shared.URL(0, key(t, "none")), Options{})
	if got := scanFingerprints(t, empty); len(got) != 0 {
		t.Errorf("missing stream: %v", got)
	}
}
