package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// caseRedisDiscover: `dlqctl categorize --discover --all -o json` against
// `dlqctl stats -o json` on the same Redis DLQ stream of N entries, both
// subprocesses, alternately. Discover's JSON carries every entry id, so
// it writes the whole DLQ's ids where stats writes a page of numbers.
// Then the same on the stream seeded again with errors that carry their
// entry's order, attempt and worker: the bench's errors are fourteen
// texts, which the miner meets again and does not mine, where real ones
// carry IDs and are each masked and mined.
const caseRedisDiscover = "redis-discover"

// DiscoverResult is the redis-discover case.
type DiscoverResult struct {
	N        int
	Seed     time.Duration
	Runs     []DiscoverRun
	Stats    string
	Discover string
	Groups   int
	// Varied and VariedGroups are the same on errors that carry IDs.
	Varied       []DiscoverRun
	VariedSeed   time.Duration
	VariedGroups int
}

// withIDs makes an entry's error carry what real ones do, so that no two
// errors are one text.
func withIDs(e *entry) {
	e.LastError = fmt.Sprintf("%s (order %s, attempt %d, %s)", e.LastError, e.Key, e.Attempts, e.OriginConsumer)
}

// DiscoverRun is one alternation.
type DiscoverRun struct {
	Stats, Discover memSampleCPU
}

type memSampleCPU struct {
	Wall   time.Duration
	CPU    time.Duration
	MaxRSS int64 // KiB
}

func (c Config) runDiscover(ctx context.Context, d *dlqctl, now time.Time, res *Results) error {
	srv, rdb, stop, err := startRedis()
	if err != nil {
		return err
	}
	defer stop()
	key := "dlq:bench:discover"
	c.logf("redis-discover: seeding %s with %d entries", key, c.N)
	start := time.Now()
	if err := seedStream(ctx, rdb, key, c.N, now); err != nil {
		return err
	}
	source := srv.URL(0, key)
	r := &DiscoverResult{N: c.N, Seed: time.Since(start)}
	res.Discover = r
	statsArgs := []string{"--config", d.config, "--source", source, "stats", "-o", "json"}
	discArgs := []string{"--config", d.config, "--source", source, "categorize", "--discover", "--all", "-o", "json"}
	r.Stats = "dlqctl " + strings.Join(statsArgs[2:], " ")
	r.Discover = "dlqctl " + strings.Join(discArgs[2:], " ")
	checkStats := func(out []byte) error {
		_, total, err := parseStats(out)
		if err == nil && total != c.N {
			err = fmt.Errorf("stats counted %d entries, want %d", total, c.N)
		}
		return err
	}
	groups := &r.Groups
	checkDiscover := func(out []byte) (err error) {
		*groups, err = discoverGroups(out, c.N)
		return err
	}
	alternate := func(what string, runs *[]DiscoverRun) error {
		for i := range c.Runs {
			var dr DiscoverRun
			if dr.Stats, err = d.sample(ctx, statsArgs, checkStats); err != nil {
				return err
			}
			if dr.Discover, err = d.sample(ctx, discArgs, checkDiscover); err != nil {
				return err
			}
			*runs = append(*runs, dr)
			c.logf("redis-discover%s run %d/%d: stats %s, discover %s (%.2f×)", what, i+1, c.Runs,
				dr.Stats.Wall.Round(time.Millisecond), dr.Discover.Wall.Round(time.Millisecond), dr.Discover.Wall.Seconds()/dr.Stats.Wall.Seconds())
		}
		return nil
	}
	if err := alternate("", &r.Runs); err != nil {
		return err
	}
	c.logf("redis-discover: seeding %s again with %d entries whose errors carry IDs", key, c.N)
	start = time.Now()
	if err := seedStreamEdited(ctx, rdb, key, c.N, now, withIDs); err != nil {
		return err
	}
	r.VariedSeed = time.Since(start)
	groups = &r.VariedGroups
	return alternate(" (errors with IDs)", &r.Varied)
}

// sample runs dlqctl with args through the launcher and checks its
// output: its wall time, CPU and peak RSS.
func (d *dlqctl) sample(ctx context.Context, args []string, check func([]byte) error) (memSampleCPU, error) {
	l, err := launch(ctx, d.launcher, d.env, append([]string{d.bin}, args...)...)
	if err != nil {
		return memSampleCPU{}, fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, l.Stderr)
	}
	return memSampleCPU{Wall: l.Wall, CPU: l.User + l.Sys, MaxRSS: l.MaxRSS}, check(l.Stdout)
}

// discoverRuns runs `categorize --discover --all -o json` on source, of n
// entries, c.Runs times, each checked to list every id.
func (c Config) discoverRuns(ctx context.Context, d *dlqctl, source string, n int) ([]memSampleCPU, error) {
	args := []string{"--config", d.config, "--source", source, "categorize", "--discover", "--all", "-o", "json"}
	check := func(out []byte) error { _, err := discoverGroups(out, n); return err }
	var runs []memSampleCPU
	for range c.Runs {
		s, err := d.sample(ctx, args, check)
		if err != nil {
			return nil, err
		}
		runs = append(runs, s)
	}
	return runs, nil
}

// discoverGroups is the number of templates in categorize --discover's
// JSON output, which must count n entries and name each one's ID.
func discoverGroups(out []byte, n int) (int, error) {
	var doc struct {
		Total  int `json:"total"`
		Groups []struct {
			Count int      `json:"count"`
			IDs   []string `json:"ids"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return 0, fmt.Errorf("categorize --discover: %v", err)
	}
	ids := 0
	for _, g := range doc.Groups {
		ids += len(g.IDs)
	}
	if doc.Total != n || ids != n {
		return 0, fmt.Errorf("categorize --discover: total %d, %d ids, want %d", doc.Total, ids, n)
	}
	return len(doc.Groups), nil
}

// discoverRSSTarget is the most discover's peak RSS may reach over n
// entries: the process and the miner (64 MiB) and 320 bytes an entry for
// the id that each group's list keeps. An id that kept its entry's whole
// text alive took 1.7 GB at 1,000,000 entries.
func discoverRSSTarget(n int) float64 { return 64 + float64(n)*320/(1<<20) }

// discoverRSSVerdict says whether every run of discover stayed under
// discoverRSSTarget(n).
func discoverRSSVerdict(runs []memSampleCPU, n int) string {
	var peak float64
	for _, x := range runs {
		peak = max(peak, mib(x.MaxRSS))
	}
	verdict := "met"
	if peak > discoverRSSTarget(n) {
		verdict = "**not met**"
	}
	return fmt.Sprintf("Peak RSS of discover, the largest of the runs: %.1f MiB (target ≤ %.0f MiB: 64 MiB and 320 bytes an entry): %s.", peak, discoverRSSTarget(n), verdict)
}

// discoverSamples is the discover half of each alternation.
func discoverSamples(runs []DiscoverRun) []memSampleCPU {
	out := make([]memSampleCPU, len(runs))
	for i, x := range runs {
		out[i] = x.Discover
	}
	return out
}

func (r *DiscoverResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### redis-discover — N = %s entries (seeded in %s), %d templates\n\n", group(float64(r.N)), r.Seed.Round(100*time.Millisecond), r.Groups)
	fmt.Fprintf(w, "`%s` against `%s`, subprocesses, alternately; ratio = discover ÷ stats (target ≤ 1.5×).\n\n", r.Discover, r.Stats)
	writeDiscoverRuns(w, r.Runs)
	fmt.Fprintf(w, "\n%s\n", discoverRSSVerdict(discoverSamples(r.Runs), r.N))
	if len(r.Varied) > 0 {
		fmt.Fprintf(w, "\nThe same stream seeded again (in %s) with errors that carry their entry's order, attempt and worker, so that each is masked and mined: %d templates.\n\n",
			r.VariedSeed.Round(100*time.Millisecond), r.VariedGroups)
		writeDiscoverRuns(w, r.Varied)
		fmt.Fprintf(w, "\n%s\n", discoverRSSVerdict(discoverSamples(r.Varied), r.N))
	}
}

func writeDiscoverRuns(w io.Writer, runs []DiscoverRun) {
	fmt.Fprintln(w, "| run | stats s | stats CPU s | stats RSS MiB | discover s | discover CPU s | discover RSS MiB | wall ratio | CPU ratio |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	var walls, cpus []float64
	for i, x := range runs {
		wr, cr := x.Discover.Wall.Seconds()/x.Stats.Wall.Seconds(), x.Discover.CPU.Seconds()/x.Stats.CPU.Seconds()
		walls, cpus = append(walls, wr), append(cpus, cr)
		fmt.Fprintf(w, "| %d | %.2f | %.2f | %.1f | %.2f | %.2f | %.1f | %.2f× | %.2f× |\n", i+1,
			x.Stats.Wall.Seconds(), x.Stats.CPU.Seconds(), mib(x.Stats.MaxRSS),
			x.Discover.Wall.Seconds(), x.Discover.CPU.Seconds(), mib(x.Discover.MaxRSS), wr, cr)
	}
	fmt.Fprintf(w, "| median | | | | | | | %.2f× | %.2f× |\n", median(walls), median(cpus))
}
