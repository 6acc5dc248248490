package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/redrive"
)

// The redrive-scale case (issue 8): the whole redrive path at N/10 and N
// entries on a real redis-server, each step a subprocess under the launcher
// so that its wall time and peak RSS are its own.
const (
	caseRedriveScale = "redrive-scale"
	scaleKey         = "dlq:bench:scale"

	// Targets of the redrive path at a million entries (docs/performance.md).
	targetScaleRSSKiB   = 512 << 10 // peak RSS of plan, apply, status and resume
	targetScaleGrowth   = 12.0      // apply(N) ÷ apply(N/10), at most
	targetJournalPerEnt = 250.0     // journal bytes per entry, at most
	targetStatusWall    = 10 * time.Second
)

// Scale is the redrive-scale case.
type Scale struct {
	Points   []ScalePoint
	Commands []string // the step command lines, with placeholders
}

// ScalePoint is one DLQ size.
type ScalePoint struct {
	N       int
	Compact bool // compact entries, moves checked by count (-scale-compact)
	Seed    time.Duration
	// RedisPeak is redis-server's used_memory_peak after the point (bytes).
	RedisPeak    int64
	Steps        []ScaleStep
	PlanBytes    int64 // the plan file after approval
	JournalBytes int64 // after apply
	Records      int   // journal lines after apply
}

// ScaleStep is one dlqctl process.
type ScaleStep struct {
	Name   string
	Wall   time.Duration
	MaxRSS int64 // KiB
}

func (p ScalePoint) step(name string) (ScaleStep, bool) {
	for _, s := range p.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return ScaleStep{}, false
}

const (
	stepPlan      = "redrive plan --limit 0"
	stepApprove   = "redrive approve"
	stepApply     = "redrive apply"
	stepStatus    = "redrive status"
	stepResume    = "redrive resume (finished run)"
	stepReconcile = "reconcile --journal"
)

func (c Config) runScale(ctx context.Context, d *dlqctl, tmp string, now time.Time, res *Results) error {
	srv, rdb, stop, err := startRedis()
	if err != nil {
		return err
	}
	defer stop()
	if res.Redis == "" {
		res.Redis = redisVersion(ctx, rdb)
	}
	sc := &Scale{}
	res.Scale = sc
	for _, n := range []int{c.ScaleN / 10, c.ScaleN} {
		p, err := c.scalePoint(ctx, d, srv, rdb, filepath.Join(tmp, "scale", strconv.Itoa(n)), n, now, sc)
		if err != nil {
			return err
		}
		sc.Points = append(sc.Points, p)
	}
	return nil
}

func (c Config) scalePoint(ctx context.Context, d *dlqctl, srv *redistest.Server, rdb *redis.Client, dir string, n int, now time.Time, sc *Scale) (ScalePoint, error) {
	p := ScalePoint{N: n}
	source := srv.URL(0, scaleKey)
	c.logf("redrive-scale N=%d: seeding", n)
	p.Compact = c.ScaleCompact
	var took time.Duration
	var err error
	if p.Compact {
		took, err = reseedCompact(ctx, rdb, scaleKey, n, now)
	} else {
		took, err = reseed(ctx, rdb, scaleKey, n, now)
	}
	if err != nil {
		return p, err
	}
	p.Seed = took
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, err
	}
	plan := filepath.Join(dir, "p.json")
	journal := redrive.DefaultJournalPath(plan)
	params := append([]string{"--limit", "0", "--rate", "0", "--ramp", strconv.Itoa(n), "--settle", "0s", "--unverified-ok"}, everyEntry...)
	steps := []struct {
		name string
		env  []string
		args []string
	}{
		{stepPlan, nil, d.planArgs(source, plan, params...)},
		{stepApprove, approvalEnv, d.approveArgs(plan)},
		{stepApply, approvalEnv, d.applyArgs(source, plan)},
		{stepStatus, nil, []string{"--config", d.config, "-o", "json", "redrive", "status", journal}},
		{stepResume, approvalEnv, []string{"--config", d.config, "redrive", "resume", journal}},
		// The plan names no effects store, so the DLQ is what reconcile
		// reads: it finds every moved event gone from it, none back.
		{stepReconcile, nil, []string{"--config", d.config, "--source", source, "-o", "json", "reconcile", "--journal", journal}},
	}
	record := len(sc.Commands) == 0
	repl := []string{source, "redis://ADDR/0?stream=" + scaleKey, journal, "p.journal", plan, "p.json"}
	for _, s := range steps {
		if record {
			sc.Commands = append(sc.Commands, d.commandLine(s.args, repl...))
		}
		c.logf("redrive-scale N=%d: %s", n, s.name)
		l, err := d.launchArgs(ctx, s.env, s.args...)
		if err != nil {
			return p, err
		}
		p.Steps = append(p.Steps, ScaleStep{Name: s.name, Wall: l.Wall, MaxRSS: l.MaxRSS})
		c.logf("redrive-scale N=%d: %s took %s, peak RSS %.1f MiB", n, s.name, l.Wall.Round(time.Millisecond), mib(l.MaxRSS))
		if err := checkScaleStep(ctx, rdb, s.name, l, plan, journal, now, &p); err != nil {
			return p, err
		}
	}
	p.RedisPeak, _ = redisMemoryPeak(ctx, rdb)
	// The next point starts from an empty server, and a large plan and
	// journal should not wait for the end of the run to leave the disk.
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return p, err
	}
	return p, os.RemoveAll(dir)
}

// redisMemoryPeak is INFO memory's used_memory_peak, in bytes.
func redisMemoryPeak(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory_peak:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO memory: no used_memory_peak")
}

// compactValues is entry i of a compact DLQ: the generator's event ID,
// key, origin and error with a payload of a few bytes and its
// fingerprint, about 150 bytes in a Redis stream.
func compactValues(g generator, i int) []any {
	o := origins[i%len(origins)]
	payload := fmt.Sprintf(`{"n":%d}`, i)
	sum := sha256.Sum256([]byte(payload))
	return []any{
		"event_id", fmt.Sprintf("evt-%s-%09d", o.stream[:3], i),
		"fingerprint", "sha256:" + hex.EncodeToString(sum[:]),
		"payload", payload,
		"key", fmt.Sprintf("order-%07d", i%5_000_000),
		"origin_stream", o.stream,
		"last_error", lastErrors[i%len(lastErrors)].text,
		"dead_lettered_at", g.base.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339),
	}
}

// reseedCompact empties the database and seeds key with n compact
// entries, seedBatch per round trip.
func reseedCompact(ctx context.Context, rdb *redis.Client, key string, n int, now time.Time) (time.Duration, error) {
	start := time.Now()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return 0, err
	}
	g := newGenerator(n, now)
	for lo := 0; lo < n; lo += seedBatch {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := lo; i < min(lo+seedBatch, n); i++ {
				p.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: "*", Values: compactValues(g, i)})
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("seed %s: %w", key, err)
		}
	}
	if got, err := rdb.XLen(ctx, key).Result(); err != nil || got != int64(n) {
		return 0, fmt.Errorf("seed %s: XLEN %d (%v), want %d", key, got, err, n)
	}
	return time.Since(start), nil
}

// checkMovedCount checks, for a compact DLQ, that the DLQ is empty and
// that its origin streams hold n entries between them.
func checkMovedCount(ctx context.Context, rdb *redis.Client, dlq string, n int) error {
	left, err := rdb.XLen(ctx, dlq).Result()
	if err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("%d entries left in the DLQ %s", left, dlq)
	}
	var moved int64
	for _, o := range originStreams() {
		l, err := rdb.XLen(ctx, o).Result()
		if err != nil {
			return err
		}
		moved += l
	}
	if moved != int64(n) {
		return fmt.Errorf("the origin streams hold %d entries, want %d", moved, n)
	}
	return nil
}

// checkScaleStep checks what a redrive-scale step at p.N left behind (l
// is its process) and records the plan's and journal's sizes into p.
func checkScaleStep(ctx context.Context, rdb *redis.Client, name string, l launched, plan, journal string, now time.Time, p *ScalePoint) error {
	n := p.N
	switch name {
	case stepApprove:
		fi, err := os.Stat(plan)
		if err != nil {
			return err
		}
		p.PlanBytes = fi.Size()
	case stepApply:
		var err error
		if _, err := parseRun(l.Stdout, n); err != nil {
			return err
		}
		if p.JournalBytes, p.Records, err = journalSize(journal); err != nil {
			return err
		}
		if p.Compact {
			if err := checkMovedCount(ctx, rdb, scaleKey, n); err != nil {
				return fmt.Errorf("redrive-scale N=%d: %v", n, err)
			}
		} else if _, err := verifyMoved(ctx, rdb, scaleKey, originStreams(), expectedEvents(n, now), true); err != nil {
			return fmt.Errorf("redrive-scale N=%d: %v", n, err)
		}
	case stepStatus:
		if _, err := parseRun(l.Stdout, n); err != nil {
			return fmt.Errorf("status: %v", err)
		}
	case stepResume:
		// A finished run: resume must change nothing.
		left, err := rdb.XLen(ctx, scaleKey).Result()
		if err != nil {
			return err
		}
		if left != 0 {
			return fmt.Errorf("resume of a finished run: %d entries in the DLQ", left)
		}
		if fi, err := os.Stat(journal); err != nil || fi.Size() != p.JournalBytes {
			return fmt.Errorf("resume of a finished run changed the journal (%v)", err)
		}
	case stepReconcile:
		return checkReconciled(l.Stdout, n)
	}
	return nil
}

// checkReconciled checks reconcile's answer for a finished run of n
// entries: its batches moved all n, and none came back to the DLQ.
func checkReconciled(out []byte, n int) error {
	var r struct {
		Schema  string `json:"schema"`
		Batches []struct {
			Moved    int            `json:"moved"`
			Verdicts map[string]int `json:"verdicts"`
		} `json:"batches"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("reconcile: %v", err)
	}
	if r.Schema != "dlqctl.reconcile/v1" {
		return fmt.Errorf("reconcile: schema %q", r.Schema)
	}
	moved, back := 0, 0
	for _, b := range r.Batches {
		moved += b.Moved
		back += b.Verdicts["re-dead-lettered"]
	}
	if moved != n || back != 0 {
		return fmt.Errorf("reconcile: %d moved, %d re-dead-lettered; want %d moved, none back", moved, back, n)
	}
	return nil
}

func (sc *Scale) write(w io.Writer) {
	fmt.Fprintf(w, "\n### redrive-scale — the redrive path at ")
	for i, p := range sc.Points {
		if i > 0 {
			fmt.Fprint(w, " and ")
		}
		fmt.Fprintf(w, "%s", group(float64(p.N)))
	}
	fmt.Fprintf(w, " entries (Redis, unthrottled, journal on)\n\nEach step a subprocess, in order, on a freshly seeded DLQ:\n\n")
	for _, cmd := range sc.Commands {
		fmt.Fprintf(w, "- `%s`\n", cmd)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | step | wall s | entries/s | peak RSS MiB |")
	fmt.Fprintln(w, "|--:|---|--:|--:|--:|")
	for _, p := range sc.Points {
		for _, s := range p.Steps {
			fmt.Fprintf(w, "| %s | %s | %.2f | %s | %.1f |\n", group(float64(p.N)), s.Name, s.Wall.Seconds(), group(rate(p.N, s.Wall)), mib(s.MaxRSS))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | seeded s | plan file MiB | plan B/entry | journal MiB | journal B/entry | journal records/entry | redis-server peak MiB |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, p := range sc.Points {
		n := float64(p.N)
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.0f | %.1f | %.0f | %.2f | %.0f |\n", group(n), p.Seed.Seconds(),
			float64(p.PlanBytes)/(1<<20), float64(p.PlanBytes)/n, float64(p.JournalBytes)/(1<<20), float64(p.JournalBytes)/n, float64(p.Records)/n,
			float64(p.RedisPeak)/(1<<20))
	}
	if sc.Points[0].Compact {
		fmt.Fprintln(w, "\nCompact entries (-scale-compact: event ID, fingerprint, a payload of a few bytes, key, origin, error, dead-letter time); the moves were checked by count.")
	}
	if len(sc.Points) < 2 {
		return
	}
	small, big := sc.Points[0], sc.Points[len(sc.Points)-1]
	fmt.Fprintf(w, "\nTargets (stated for 1,000,000 entries), checked at N = %s:\n\n", group(float64(big.N)))
	if a, ok := small.step(stepApply); ok {
		if b, ok := big.step(stepApply); ok {
			g := b.Wall.Seconds() / a.Wall.Seconds()
			fmt.Fprintf(w, "- apply(%s) ÷ apply(%s) ≤ %.0f× (linear would be %.0f×): %s (%.2f×)\n", group(float64(big.N)), group(float64(small.N)),
				targetScaleGrowth, float64(big.N)/float64(small.N), verdict(g <= targetScaleGrowth), g)
		}
	}
	for _, name := range []string{stepPlan, stepApply, stepStatus, stepResume} {
		if s, ok := big.step(name); ok {
			fmt.Fprintf(w, "- peak RSS of `%s` ≤ %d MiB: %s (%.1f MiB)\n", name, targetScaleRSSKiB>>10, verdict(s.MaxRSS <= targetScaleRSSKiB), mib(s.MaxRSS))
		}
	}
	per := float64(big.JournalBytes) / float64(big.N)
	fmt.Fprintf(w, "- journal ≤ %.0f B per entry: %s (%.0f B)\n", targetJournalPerEnt, verdict(per <= targetJournalPerEnt), per)
	if s, ok := big.step(stepStatus); ok {
		fmt.Fprintf(w, "- `redrive status` ≤ %s: %s (%.2f s)\n", targetStatusWall, verdict(s.Wall <= targetStatusWall), s.Wall.Seconds())
	}
	check := "every event was in its origin stream exactly once, with its fingerprint"
	if big.Compact {
		check = "its origin streams held N entries between them"
	}
	fmt.Fprintf(w, "\nAt each N the DLQ ended empty and %s; `resume` of the finished run left the DLQ and the journal as they were.\n", check)
}
