package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUIHarnessSmall keeps the redis-ui case working at N=2000, one
// alternation: the browser drew its milestones on the pty, opened the
// category's page and exited 0, and list printed a full page (Run fails
// otherwise). It asserts no timing.
func TestUIHarnessSmall(t *testing.T) {
	cfg := Config{Cases: []string{caseRedisUI}, N: 2000, Runs: 1}
	res, err := cfg.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u := res.UI
	if u == nil || len(u.Runs) != 1 {
		t.Fatalf("redis-ui: %+v", u)
	}
	if r := u.Runs[0]; r.FirstFrame <= 0 || r.FirstCounts < r.FirstFrame || r.ScanDone < r.FirstCounts || r.FirstPage <= 0 || r.EarlyPage <= 0 || r.List <= 0 {
		t.Errorf("redis-ui: a milestone is missing or out of order: %+v", r)
	}
	var out bytes.Buffer
	res.Write(&out)
	if !strings.Contains(out.String(), "### redis-ui") {
		t.Errorf("report lacks redis-ui:\n%s", out.String())
	}
}
