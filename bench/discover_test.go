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
