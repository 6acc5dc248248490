package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	redisstream "github.com/dlqctl/dlqctl/backends/redis"
	"github.com/dlqctl/dlqctl/redrive"
)

// applyCosts are the steps `redrive apply` takes before its first move,
// each timed on its own in the bench process against the same plan and
// DLQ as the apply that follows (none of them changes anything), so that
// the journal's one "start-up to run-start" phase can be told apart.
type applyCosts struct {
	// Startup is the whole `dlqctl version` process: what every command
	// pays before it does anything.
	Startup time.Duration
	// Read is redrive.ReadPlan, Verify the digest check, Approve the
	// approval check (Plan.CheckApprovals under the bench's key), Open
	// opening the source, Lease taking and giving back the DLQ's lease,
	// Stale the staleness check against the DLQ (redrive.Stale on the
	// opened source).
	Read, Verify, Approve, Open, Lease, Stale time.Duration
}

// measureApplyCosts times each fixed step of an apply of plan on source.
func (d *dlqctl) measureApplyCosts(ctx context.Context, source, plan string) (applyCosts, error) {
	var c applyCosts
	l, err := d.launchArgs(ctx, nil, "--config", d.config, "version")
	if err != nil {
		return c, err
	}
	c.Startup = l.Wall
	start := time.Now()
	p, err := redrive.ReadPlan(plan)
	if err != nil {
		return c, err
	}
	c.Read = time.Since(start)
	start = time.Now()
	if err := p.Verify(); err != nil {
		return c, err
	}
	c.Verify = time.Since(start)
	start = time.Now()
	if _, err := p.CheckApprovals(redrive.ApprovalPolicy{Key: []byte(approvalKey), Now: time.Now()}); err != nil {
		return c, err
	}
	c.Approve = time.Since(start)
	start = time.Now()
	src, err := redisstream.Open(ctx, source, redisstream.Options{})
	if err != nil {
		return c, err
	}
	defer src.Close()
	c.Open = time.Since(start)
	start = time.Now()
	_, release, err := redrive.LeaseDLQ(ctx, src, backend.ThisProcess("bench", time.Now().UTC()), io.Discard)
	if err != nil {
		return c, err
	}
	if err := release(); err != nil {
		return c, err
	}
	c.Lease = time.Since(start)
	start = time.Now()
	missing, changed, err := redrive.Stale(ctx, src, p)
	if err != nil {
		return c, err
	}
	c.Stale = time.Since(start)
	if len(missing)+len(changed) > 0 {
		return c, fmt.Errorf("staleness check: %d missing, %d changed on a fresh DLQ", len(missing), len(changed))
	}
	return c, nil
}

// writeApplyCosts prints the median of each fixed step over the runs.
func (rd *Redrive) writeApplyCosts(w io.Writer) {
	if len(rd.Runs) == 0 || rd.Runs[0].Costs.Read == 0 {
		return
	}
	med := func(f func(applyCosts) time.Duration) float64 {
		var xs []float64
		for _, r := range rd.Runs {
			xs = append(xs, f(r.Costs).Seconds())
		}
		return median(xs)
	}
	apply := median(func() []float64 {
		var xs []float64
		for _, r := range rd.Runs {
			xs = append(xs, r.Apply.Seconds())
		}
		return xs
	}())
	rows := []struct {
		name string
		v    float64
	}{
		{"process start-up and exit (`dlqctl version`)", med(func(c applyCosts) time.Duration { return c.Startup })},
		{"read the plan (redrive.ReadPlan)", med(func(c applyCosts) time.Duration { return c.Read })},
		{"verify its digest (Plan.Verify)", med(func(c applyCosts) time.Duration { return c.Verify })},
		{"check its approval (Plan.CheckApprovals)", med(func(c applyCosts) time.Duration { return c.Approve })},
		{"open the source (connect, PING, TYPE)", med(func(c applyCosts) time.Duration { return c.Open })},
		{"take and give back the DLQ's lease (redrive.LeaseDLQ)", med(func(c applyCosts) time.Duration { return c.Lease })},
		{"staleness check (redrive.Stale)", med(func(c applyCosts) time.Duration { return c.Stale })},
	}
	fmt.Fprintf(w, "\nThe fixed steps before the first move, each timed alone in the bench process on the same plan and DLQ just before the apply (median):\n\n")
	fmt.Fprintln(w, "| step | s | share of apply |")
	fmt.Fprintln(w, "|---|--:|--:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.3f | %.0f %% |\n", r.name, r.v, 100*r.v/apply)
	}
	fmt.Fprintln(w)
}

// commandStats is INFO commandstats: per command, its calls and the
// server's microseconds in it so far.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string][2]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string][2]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var v [2]int64
		for _, kv := range strings.Split(rest, ",") {
			k, val, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch k {
			case "calls":
				v[0] = n
			case "usec":
				v[1] = n
			}
		}
		out[name] = v
	}
	return out, nil
}

// serverWork is what the server did between two commandStats, the
// commands it spent most time in first: "evalsha 100×, 1.62 s; …".
func serverWork(before, after map[string][2]int64) string {
	type row struct {
		name        string
		calls, usec int64
	}
	var rows []row
	for name, a := range after {
		b := before[name]
		if a[0] > b[0] {
			rows = append(rows, row{name, a[0] - b[0], a[1] - b[1]})
		}
	}
	slices.SortFunc(rows, func(x, y row) int { return cmp.Compare(y.usec, x.usec) })
	var parts []string
	for _, r := range rows {
		if r.name == "info" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d×, %.3f s", r.name, r.calls, float64(r.usec)/1e6))
	}
	return strings.Join(parts, "; ")
}
