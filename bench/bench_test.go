package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHarnessSmall keeps the benchmark compiling and working: every case
// but pulsar-stats (which starts a broker) at N=2000, rate at 200 entries
// (one second at 200/s), redrive-scale at 200 and 2000, one alternation. It asserts only that both sides
// processed every entry (Run fails otherwise) and that a report is written,
// never timings.
func TestHarnessSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dlqctl and starts redis-server")
	}
	const n = 2000
	cfg := Config{
		Cases: []string{caseRedisStats, caseRedisRSS, caseDirStats, caseRedisRedrive, caseRate, caseRedriveScale},
		N:     n, DirN: n, RSSN: []int{n / 10, n}, RedriveN: n, RateN: 200, ScaleN: n, Runs: 1,
		InProcess: true, RawRSS: true,
	}
	res, err := cfg.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []*Throughput{res.RedisStats, res.DirStats} {
		if tp == nil || len(tp.Runs) != 1 || tp.N != n {
			t.Fatalf("throughput case missing or incomplete: %+v", tp)
		}
		if r := tp.Runs[0]; r.Raw <= 0 || r.Proc <= 0 || r.In <= 0 {
			t.Errorf("%s: a side did not run: %+v", tp.Case, r)
		}
	}
	if len(res.RSS) != 2 || res.RSS[1].N != n || len(res.RSS[1].Dlqctl) != 1 || res.RSS[1].Dlqctl[0].MaxRSS <= 0 ||
		len(res.RSS[0].Raw) != 1 || res.RSS[0].Raw[0].MaxRSS <= 0 {
		t.Errorf("redis-rss: %+v", res.RSS)
	}
	if r := res.RedisStats; r != nil && r.Runs[0].Floor <= 0 {
		t.Errorf("redis-stats: the floor did not run: %+v", r.Runs[0])
	}
	if rd := res.Redrive; rd == nil || rd.N != n || len(rd.Runs) != 1 || rd.Runs[0].Raw <= 0 || rd.Runs[0].Apply <= 0 || rd.Runs[0].Journal <= 0 {
		t.Errorf("redis-redrive: %+v", rd)
	} else if c := rd.Runs[0].Costs; c.Startup <= 0 || c.Read <= 0 || c.Verify <= 0 || c.Stale <= 0 {
		t.Errorf("redis-redrive: apply's fixed steps not measured: %+v", c)
	}
	if rr := res.Rate; rr == nil || rr.N != 200 || rr.Span <= 0 || rr.MaxWindow <= 0 {
		t.Errorf("rate: %+v", rr)
	}
	if sc := res.Scale; sc == nil || len(sc.Points) != 2 || sc.Points[1].N != n || sc.Points[1].JournalBytes <= 0 {
		t.Errorf("redrive-scale: %+v", sc)
	} else if s, ok := sc.Points[1].step(stepApply); !ok || s.Wall <= 0 || s.MaxRSS <= 0 {
		t.Errorf("redrive-scale: apply not measured: %+v", sc.Points[1].Steps)
	}
	var out bytes.Buffer
	res.Write(&out)
	for _, want := range []string{"### redis-stats", "Against the floor", "### redis-rss", "### dir-stats", "### redis-redrive", "The fixed steps before the first move", "### rate", "### redrive-scale"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestNATSSmall runs nats-stats and nats-redrive at 500 copies, one
// alternation, on a real nats-server: both sides processed every copy
// (Run fails otherwise) and the report has both sections.
func TestNATSSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dlqctl and starts nats-server")
	}
	cfg := Config{Cases: []string{caseNATSStats, caseNATSRedrive}, NATSN: 500, NATSRedriveN: 500, Runs: 1, InProcess: true}
	res, err := cfg.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	nb := res.NATS
	if nb == nil || nb.Stats == nil || len(nb.Stats.Runs) != 1 || nb.Stats.Runs[0].Raw <= 0 || nb.Stats.Runs[0].Proc <= 0 ||
		len(nb.Redrive) != 1 || nb.Redrive[0].Raw <= 0 || nb.Redrive[0].Apply <= 0 {
		t.Fatalf("nats cases incomplete: %+v", nb)
	}
	var out bytes.Buffer
	res.Write(&out)
	for _, want := range []string{"### nats-stats", "### nats-redrive"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
