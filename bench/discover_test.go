package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDiscoverHarnessSmall keeps the redis-discover case working at
// N=2000, one alternation: both commands read every entry and discover
// listed every id (Run fails otherwise). It asserts no timing.
func TestDiscoverHarnessSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dlqctl and starts redis-server")
	}
	cfg := Config{Cases: []string{caseRedisDiscover}, N: 2000, Runs: 1}
	res, err := cfg.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := res.Discover
	if r == nil || len(r.Runs) != 1 || r.Runs[0].Stats.Wall <= 0 || r.Runs[0].Discover.Wall <= 0 || r.Groups == 0 {
		t.Fatalf("redis-discover: %+v", r)
	}
	// IDs in the errors change no template.
	if len(r.Varied) != 1 || r.Varied[0].Discover.Wall <= 0 || r.VariedGroups != r.Groups {
		t.Fatalf("redis-discover, errors with IDs: %d runs, %d templates, want 1 and %d", len(r.Varied), r.VariedGroups, r.Groups)
	}
	var out bytes.Buffer
	res.Write(&out)
	if !strings.Contains(out.String(), "### redis-discover") {
		t.Errorf("report lacks redis-discover:\n%s", out.String())
	}
}

// TestDiscoverRSSVerdict: the memory target scales with the entries and
// names a run over it.
func TestDiscoverRSSVerdict(t *testing.T) {
	run := func(mib int64) memSampleCPU { return memSampleCPU{MaxRSS: mib << 10} }
	for _, c := range []struct {
		runs []memSampleCPU
		n    int
		want string
	}{
		{[]memSampleCPU{run(245), run(275)}, 1_000_000, "275.0 MiB (target ≤ 369 MiB: 64 MiB and 320 bytes an entry): met."},
		{[]memSampleCPU{run(245), run(1713)}, 1_000_000, "1713.0 MiB (target ≤ 369 MiB: 64 MiB and 320 bytes an entry): **not met**."},
		{[]memSampleCPU{run(70)}, 2000, "70.0 MiB (target ≤ 65 MiB: 64 MiB and 320 bytes an entry): **not met**."},
	} {
		if got := discoverRSSVerdict(c.runs, c.n); !strings.HasSuffix(got, c.want) {
			t.Errorf("discoverRSSVerdict(%d entries) = %q, want it to end %q", c.n, got, c.want)
		}
	}
}
