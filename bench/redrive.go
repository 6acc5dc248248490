package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/bench/raw"
	"github.com/dlqctl/dlqctl/redrive"
)

// The redrive cases: redis-redrive (throughput of `dlqctl redrive apply`
// against a pipelined Lua move loop) and rate (how closely `--rate 200
// --burst 10` holds).
const (
	redriveKey = "dlq:bench:redrive"
	rateKey    = "dlq:bench:rate"
	rateDest   = "bench:rate:dest"
	// destField names each entry's destination stream (the canonical envelope form, docs/json.md).
	destField = "origin_stream"

	rateLimit     = 200
	rateBurst     = 10
	rateTolerance = 0.03 // achieved rate within ±3 % of rateLimit

	targetRedriveRatio = 0.6 // dlqctl apply entries/s ÷ raw move loop entries/s, at least (issue 8)
)

// Redrive is the redis-redrive case: Runs alternations of the raw move
// loop and `dlqctl redrive apply`, each on a freshly seeded DLQ.
type Redrive struct {
	N       int
	Seed    []time.Duration
	Runs    []RedriveRun
	Plan    string // the dlqctl command lines, with placeholders
	Approve string
	Apply   string
	Profile []string
}

// RedriveRun is one alternation.
type RedriveRun struct {
	Raw       time.Duration // raw move loop, wall
	RawCPU    time.Duration // the bench process's CPU during it
	RawServer time.Duration // redis-server's CPU during it
	RawRead   time.Duration // of which reading the ids (XRANGE pages)

	Plan      time.Duration // `dlqctl redrive plan`, wall
	PlanRSS   int64         // KiB
	PlanBytes int64         // the plan file after approval

	Apply       time.Duration // `dlqctl redrive apply`, wall
	ApplyCPU    time.Duration // its user+sys CPU
	ApplyServer time.Duration // redis-server's CPU during it
	ApplyRSS    int64         // KiB
	Journal     int64         // bytes
	Records     int           // journal lines
	Batches     int
	Phases      applyPhases
	Costs       applyCosts // the fixed steps, timed alone before the apply
	// RawCommands and ApplyCommands are the server's time by command
	// during each side (serverWork).
	RawCommands, ApplyCommands string
}

// RateResult is the rate case: one `dlqctl redrive apply` under --rate and
// --burst, timed by the destination entries' stream IDs.
type RateResult struct {
	N, Rate, Burst int
	Apply          time.Duration // wall of the apply process
	Span           time.Duration // first to last send (destination IDs)
	Achieved       float64       // N ÷ Span
	MaxWindow      int           // most sends in any one-second window
	Plan, Apply2   string        // command lines
}

// want is what an event must look like at its destination.
type want struct{ fingerprint, origin string }

// expectedEvents is every seeded event by ID.
func expectedEvents(n int, now time.Time) map[string]want {
	g := newGenerator(n, now)
	out := make(map[string]want, n)
	for i := range n {
		e := g.entry(i)
		out[e.EventID] = want{e.Fingerprint, e.OriginStream}
	}
	return out
}

func originStreams() []string {
	var out []string
	for _, o := range origins {
		out = append(out, o.stream)
	}
	return out
}

// verifyMoved checks that the DLQ is empty and that every expected event is
// in the destination streams exactly once, with its fingerprint and, when
// byOrigin, in its origin stream. It returns the stream IDs read.
func verifyMoved(ctx context.Context, rdb *redis.Client, dlq string, dests []string, exp map[string]want, byOrigin bool) ([]string, error) {
	left, err := rdb.XLen(ctx, dlq).Result()
	if err != nil {
		return nil, err
	}
	if left != 0 {
		return nil, fmt.Errorf("%d entries left in the DLQ %s", left, dlq)
	}
	seen := make(map[string]bool, len(exp))
	var ids []string
	for _, dest := range dests {
		start := "-"
		for {
			msgs, err := rdb.XRangeN(ctx, dest, start, "+", raw.PageSize).Result()
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				ev, _ := m.Values["event_id"].(string)
				w, ok := exp[ev]
				switch {
				case !ok:
					return nil, fmt.Errorf("%s %s: unexpected event %q", dest, m.ID, ev)
				case seen[ev]:
					return nil, fmt.Errorf("%s %s: event %s arrived twice", dest, m.ID, ev)
				case m.Values["fingerprint"] != w.fingerprint:
					return nil, fmt.Errorf("%s %s: event %s has fingerprint %v, want %s", dest, m.ID, ev, m.Values["fingerprint"], w.fingerprint)
				case byOrigin && dest != w.origin:
					return nil, fmt.Errorf("%s %s: event %s belongs in %s", dest, m.ID, ev, w.origin)
				}
				seen[ev] = true
				ids = append(ids, m.ID)
			}
			if len(msgs) < raw.PageSize {
				break
			}
			start = "(" + msgs[len(msgs)-1].ID
		}
	}
	if len(seen) != len(exp) {
		return nil, fmt.Errorf("%d of %d events arrived", len(seen), len(exp))
	}
	return ids, nil
}

// redisCPU is redis-server's user+system CPU so far (INFO cpu).
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %v", k, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

func redisVersion(ctx context.Context, rdb *redis.Client) string {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

// reseed empties the database and seeds key with n entries.
func reseed(ctx context.Context, rdb *redis.Client, key string, n int, now time.Time) (time.Duration, error) {
	start := time.Now()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return 0, err
	}
	if err := seedStream(ctx, rdb, key, n, now); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// runDoc is the part of dlqctl.run/v1 the bench checks.
type runDoc struct {
	Schema  string            `json:"schema"`
	Status  string            `json:"status"`
	Planned int               `json:"planned"`
	Moved   int               `json:"moved"`
	Gone    int               `json:"gone"`
	Skipped int               `json:"skipped"`
	Failed  int               `json:"failed"`
	Batches []json.RawMessage `json:"batches"`
}

func parseRun(out []byte, n int) (runDoc, error) {
	var doc runDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return doc, fmt.Errorf("apply output is not JSON: %v: %.200s", err, out)
	}
	if doc.Schema != "dlqctl.run/v1" || doc.Status != redrive.StatusCompleted || doc.Planned != n || doc.Moved != n {
		return doc, fmt.Errorf("apply: status %q, planned %d, moved %d (want %s, %d, %d): %.300s", doc.Status, doc.Planned, doc.Moved, redrive.StatusCompleted, n, n, out)
	}
	return doc, nil
}

func (d *dlqctl) planArgs(source, plan string, params ...string) []string {
	args := []string{"--config", d.config, "--source", source, "redrive", "plan"}
	args = append(args, params...)
	return append(args, "--reason", "bench", "--out", plan)
}

func (d *dlqctl) approveArgs(plan string) []string {
	return []string{"--config", d.config, "redrive", "approve", plan}
}

func (d *dlqctl) applyArgs(source, plan string) []string {
	return []string{"--config", d.config, "--source", source, "-o", "json", "redrive", "apply", plan}
}

var approvalEnv = []string{"DLQCTL_APPROVAL_KEY=" + approvalKey}

// everyEntry makes a plan take every seeded entry whatever its category:
// the bench measures moves, and the planner takes only the redrive
// disposition by default.
var everyEntry = []string{"--allow-disposition", "fix-then-redrive,investigate,resolve,quarantine", "--include-quarantined"}

// planApprove writes a plan in dir and approves it; it returns the plan's
// path and the plan process's report.
func (d *dlqctl) planApprove(ctx context.Context, source, dir string, params ...string) (string, launched, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", launched{}, err
	}
	plan := filepath.Join(dir, "p.json")
	lp, err := d.launchArgs(ctx, nil, d.planArgs(source, plan, params...)...)
	if err != nil {
		return "", lp, err
	}
	if _, err := d.launchArgs(ctx, approvalEnv, d.approveArgs(plan)...); err != nil {
		return "", lp, err
	}
	return plan, lp, nil
}

// commandLine shows args with the bench's temporary paths replaced.
func (d *dlqctl) commandLine(args []string, repl ...string) string {
	r := strings.NewReplacer(append([]string{d.config, "EMPTY"}, repl...)...)
	return "dlqctl " + r.Replace(strings.Join(args, " "))
}

func (c Config) runRedrive(ctx context.Context, d *dlqctl, tmp string, now time.Time, res *Results) error {
	srv, rdb, stop, err := startRedis()
	if err != nil {
		return err
	}
	defer stop()
	if res.Redis == "" {
		res.Redis = redisVersion(ctx, rdb)
	}
	work := filepath.Join(tmp, "redrive")
	if slices.Contains(c.Cases, caseRedisRedrive) {
		if err := c.redisRedrive(ctx, d, srv, rdb, work, now, res); err != nil {
			return err
		}
	}
	if slices.Contains(c.Cases, caseRate) {
		if err := c.rate(ctx, d, srv, rdb, work, now, res); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) redisRedrive(ctx context.Context, d *dlqctl, srv *redistest.Server, rdb *redis.Client, work string, now time.Time, res *Results) error {
	n := c.RedriveN
	rr := redisRedriveRun{c: c, d: d, rdb: rdb, n: n, now: now, source: srv.URL(0, redriveKey),
		exp: expectedEvents(n, now), dests: originStreams(), params: c.redriveParams(n)}
	rd := &Redrive{N: n}
	res.Redrive = rd
	{
		plan := filepath.Join(work, "RUN", "p.json")
		repl := []string{rr.source, "redis://ADDR/0?stream=" + redriveKey, plan, "p.json"}
		rd.Plan = d.commandLine(d.planArgs(rr.source, plan, rr.params...), repl...)
		rd.Approve = "DLQCTL_APPROVAL_KEY=… " + d.commandLine(d.approveArgs(plan), repl...)
		rd.Apply = "DLQCTL_APPROVAL_KEY=… " + d.commandLine(d.applyArgs(rr.source, plan), repl...)
	}
	for i := range c.Runs {
		var r RedriveRun
		if err := rr.raw(ctx, i, rd, &r); err != nil {
			return err
		}
		c.logf("redis-redrive run %d/%d: raw %s; seeding for dlqctl", i+1, c.Runs, r.Raw.Round(time.Millisecond))
		if err := rr.dlqctl(ctx, filepath.Join(work, fmt.Sprintf("run-%d", i+1)), &r); err != nil {
			return err
		}
		rd.Runs = append(rd.Runs, r)
		c.logf("redis-redrive run %d/%d: raw %s, dlqctl plan %s, apply %s (journal %.1f MiB)", i+1, c.Runs,
			r.Raw.Round(time.Millisecond), r.Plan.Round(time.Millisecond), r.Apply.Round(time.Millisecond), float64(r.Journal)/(1<<20))
	}
	if c.CPUProfile == "" && c.MemProfile == "" {
		return nil
	}
	return rr.profile(ctx, filepath.Join(work, "profile"), rd)
}

// redriveParams are redis-redrive's plan flags: unthrottled, every entry,
// the ramp -redrive-ramp asks for.
func (c Config) redriveParams(n int) []string {
	params := []string{"--rate", "0", "--settle", "0s", "--unverified-ok"}
	switch c.RedriveRamp {
	case "", "one":
		params = append(params, "--ramp", strconv.Itoa(n))
	case "default":
	default:
		params = append(params, "--ramp", c.RedriveRamp)
	}
	return append(params, everyEntry...)
}

// redisRedriveRun is redis-redrive's fixed parts: the DLQ of n entries at
// source, what each event must look like where it lands, and the plan's
// flags.
type redisRedriveRun struct {
	c      Config
	d      *dlqctl
	rdb    *redis.Client
	n      int
	now    time.Time
	source string
	exp    map[string]want
	dests  []string
	params []string
}

// raw reseeds the DLQ and times the pipelined Lua move loop into r, with
// redis-server's CPU during it, then checks where every entry went.
func (rr redisRedriveRun) raw(ctx context.Context, i int, rd *Redrive, r *RedriveRun) error {
	rr.c.logf("redis-redrive run %d/%d: seeding %d entries for the raw move loop", i+1, rr.c.Runs, rr.n)
	took, err := reseed(ctx, rr.rdb, redriveKey, rr.n, rr.now)
	if err != nil {
		return err
	}
	rd.Seed = append(rd.Seed, took)
	srv0, err := redisCPU(ctx, rr.rdb)
	if err != nil {
		return err
	}
	cs0, err := commandStats(ctx, rr.rdb)
	if err != nil {
		return err
	}
	cpu0, start := cpuTime(), time.Now()
	moved, read, err := raw.RedisMoveLoop(ctx, rr.rdb, redriveKey, destField, rr.c.RawChunk)
	r.RawRead = read
	r.Raw, r.RawCPU = time.Since(start), cpuTime()-cpu0
	if err != nil {
		return fmt.Errorf("raw move loop: %v", err)
	}
	srv1, err := redisCPU(ctx, rr.rdb)
	if err != nil {
		return err
	}
	r.RawServer = srv1 - srv0
	cs1, err := commandStats(ctx, rr.rdb)
	if err != nil {
		return err
	}
	r.RawCommands = serverWork(cs0, cs1)
	if moved != rr.n {
		return fmt.Errorf("raw move loop moved %d entries, want %d", moved, rr.n)
	}
	if _, err := verifyMoved(ctx, rr.rdb, redriveKey, rr.dests, rr.exp, true); err != nil {
		return fmt.Errorf("raw move loop: %v", err)
	}
	return nil
}

// dlqctl reseeds the DLQ, plans and approves in dir, then times the apply
// into r (with redis-server's CPU during it), reads its journal's size and
// phases, and checks where every entry went.
func (rr redisRedriveRun) dlqctl(ctx context.Context, dir string, r *RedriveRun) error {
	d := rr.d
	if _, err := reseed(ctx, rr.rdb, redriveKey, rr.n, rr.now); err != nil {
		return err
	}
	plan, lp, err := d.planApprove(ctx, rr.source, dir, rr.params...)
	if err != nil {
		return err
	}
	r.Plan, r.PlanRSS = lp.Wall, lp.MaxRSS
	if fi, err := os.Stat(plan); err == nil {
		r.PlanBytes = fi.Size()
	}
	if r.Costs, err = d.measureApplyCosts(ctx, rr.source, plan); err != nil {
		return err
	}
	srv0, err := redisCPU(ctx, rr.rdb)
	if err != nil {
		return err
	}
	cs0, err := commandStats(ctx, rr.rdb)
	if err != nil {
		return err
	}
	launched := time.Now()
	la, err := d.launchArgs(ctx, approvalEnv, d.applyArgs(rr.source, plan)...)
	if err != nil {
		return err
	}
	srv1, err := redisCPU(ctx, rr.rdb)
	if err != nil {
		return err
	}
	r.Apply, r.ApplyCPU, r.ApplyRSS, r.ApplyServer = la.Wall, la.User+la.Sys, la.MaxRSS, srv1-srv0
	cs1, err := commandStats(ctx, rr.rdb)
	if err != nil {
		return err
	}
	r.ApplyCommands = serverWork(cs0, cs1)
	doc, err := parseRun(la.Stdout, rr.n)
	if err != nil {
		return err
	}
	r.Batches = len(doc.Batches)
	if r.Journal, r.Records, err = journalSize(redrive.DefaultJournalPath(plan)); err != nil {
		return err
	}
	if r.Phases, err = journalPhases(redrive.DefaultJournalPath(plan), launched, la.Wall); err != nil {
		return err
	}
	if _, err := verifyMoved(ctx, rr.rdb, redriveKey, rr.dests, rr.exp, true); err != nil {
		return fmt.Errorf("dlqctl redrive apply: %v", err)
	}
	return nil
}

// profile runs one more apply in this process, on a fresh DLQ planned in
// dir, with the CPU and/or allocation profile on.
func (rr redisRedriveRun) profile(ctx context.Context, dir string, rd *Redrive) error {
	d := rr.d
	cpu, mem, paths := rr.c.profilePaths("redrive")
	rd.Profile = append(rd.Profile, paths...)
	rr.c.logf("profiling dlqctl redrive apply in-process")
	if _, err := reseed(ctx, rr.rdb, redriveKey, rr.n, rr.now); err != nil {
		return err
	}
	plan, _, err := d.planApprove(ctx, rr.source, dir, rr.params...)
	if err != nil {
		return err
	}
	_, out, err := d.execInProcess(ctx, map[string]string{"DLQCTL_APPROVAL_KEY": approvalKey}, d.applyArgs(rr.source, plan), cpu, mem)
	if err != nil {
		return err
	}
	if _, err := parseRun(out, rr.n); err != nil {
		return err
	}
	_, err = verifyMoved(ctx, rr.rdb, redriveKey, rr.dests, rr.exp, true)
	return err
}

// journalSize is the journal's size and its number of records (lines).
func journalSize(path string) (int64, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("journal: %v", err)
	}
	return int64(len(b)), bytes.Count(b, []byte{'\n'}), nil
}

func (c Config) rate(ctx context.Context, d *dlqctl, srv *redistest.Server, rdb *redis.Client, work string, now time.Time, res *Results) error {
	n := c.RateN
	source := srv.URL(0, rateKey)
	c.logf("rate: seeding %d entries", n)
	if _, err := reseed(ctx, rdb, rateKey, n, now); err != nil {
		return err
	}
	params := []string{"--rate", strconv.Itoa(rateLimit), "--burst", strconv.Itoa(rateBurst), "--ramp", strconv.Itoa(n),
		"--settle", "0s", "--unverified-ok", "--to", rateDest}
	params = append(params, everyEntry...)
	dir := filepath.Join(work, "rate")
	plan, _, err := d.planApprove(ctx, source, dir, params...)
	if err != nil {
		return err
	}
	repl := []string{source, "redis://ADDR/0?stream=" + rateKey, plan, "p.json"}
	rr := &RateResult{N: n, Rate: rateLimit, Burst: rateBurst,
		Plan: d.commandLine(d.planArgs(source, plan, params...), repl...), Apply2: d.commandLine(d.applyArgs(source, plan), repl...)}
	c.logf("rate: dlqctl redrive apply at %d/s, burst %d (about %.0f s)", rateLimit, rateBurst, float64(n)/rateLimit)
	la, err := d.launchArgs(ctx, approvalEnv, d.applyArgs(source, plan)...)
	if err != nil {
		return err
	}
	if _, err := parseRun(la.Stdout, n); err != nil {
		return err
	}
	rr.Apply = la.Wall
	ids, err := verifyMoved(ctx, rdb, rateKey, []string{rateDest}, expectedEvents(n, now), false)
	if err != nil {
		return fmt.Errorf("rate: %v", err)
	}
	ms, err := idMillis(ids)
	if err != nil {
		return err
	}
	rr.Span = time.Duration(ms[len(ms)-1]-ms[0]) * time.Millisecond
	rr.Achieved = rate(n, rr.Span)
	rr.MaxWindow = maxInWindow(ms, 1000)
	res.Rate = rr
	c.logf("rate: %d entries in %s: %.1f/s, at most %d in one second", n, rr.Span, rr.Achieved, rr.MaxWindow)
	return nil
}

// idMillis is the millisecond part of each stream ID, sorted.
func idMillis(ids []string) ([]int64, error) {
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		msPart, _, _ := strings.Cut(id, "-")
		v, err := strconv.ParseInt(msPart, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stream ID %q: %v", id, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no entries at the destination")
	}
	slices.Sort(out)
	return out, nil
}

// maxInWindow is the largest number of ts (sorted) in any half-open window
// [t, t+width); the largest is always at a window that starts at some ts.
func maxInWindow(ts []int64, width int64) int {
	best, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j] < ts[i]+width {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

func (rd *Redrive) write(w io.Writer) {
	fmt.Fprintf(w, "\n### redis-redrive — N = %s entries", group(float64(rd.N)))
	if len(rd.Seed) > 0 {
		var s []float64
		for _, d := range rd.Seed {
			s = append(s, d.Seconds())
		}
		fmt.Fprintf(w, " (seeded in %.1fs, median, before each side)", median(s))
	}
	fmt.Fprintf(w, "\n\ndlqctl side, per run in a fresh folder: `%s`, `%s`, then timed: `%s`.\n\n", rd.Plan, rd.Approve, rd.Apply)
	fmt.Fprintln(w, "| run | raw s | raw entries/s | raw CPU s | redis CPU s (raw) | dlqctl apply s | dlqctl entries/s | ratio | apply CPU s | redis CPU s (apply) | apply peak RSS MiB | plan s | plan peak RSS MiB | journal MiB | journal records |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	n := float64(rd.N)
	row := func(name string, r RedriveRun) {
		fmt.Fprintf(w, "| %s | %.2f | %s | %.2f | %.2f | %.2f | %s | %.2f× | %.2f | %.2f | %.1f | %.2f | %.1f | %.1f | %s |\n", name,
			r.Raw.Seconds(), group(n/r.Raw.Seconds()), r.RawCPU.Seconds(), r.RawServer.Seconds(),
			r.Apply.Seconds(), group(n/r.Apply.Seconds()), r.Raw.Seconds()/r.Apply.Seconds(), r.ApplyCPU.Seconds(), r.ApplyServer.Seconds(),
			mib(r.ApplyRSS), r.Plan.Seconds(), mib(r.PlanRSS), float64(r.Journal)/(1<<20), group(float64(r.Records)))
	}
	for i, r := range rd.Runs {
		row(fmt.Sprint(i+1), r)
	}
	col := func(f func(RedriveRun) float64) float64 {
		var xs []float64
		for _, r := range rd.Runs {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	sec := func(d time.Duration) float64 { return d.Seconds() }
	med := RedriveRun{
		Raw:         time.Duration(col(func(r RedriveRun) float64 { return sec(r.Raw) }) * float64(time.Second)),
		RawCPU:      time.Duration(col(func(r RedriveRun) float64 { return sec(r.RawCPU) }) * float64(time.Second)),
		RawServer:   time.Duration(col(func(r RedriveRun) float64 { return sec(r.RawServer) }) * float64(time.Second)),
		Apply:       time.Duration(col(func(r RedriveRun) float64 { return sec(r.Apply) }) * float64(time.Second)),
		ApplyCPU:    time.Duration(col(func(r RedriveRun) float64 { return sec(r.ApplyCPU) }) * float64(time.Second)),
		ApplyServer: time.Duration(col(func(r RedriveRun) float64 { return sec(r.ApplyServer) }) * float64(time.Second)),
		ApplyRSS:    int64(col(func(r RedriveRun) float64 { return float64(r.ApplyRSS) })),
		Plan:        time.Duration(col(func(r RedriveRun) float64 { return sec(r.Plan) }) * float64(time.Second)),
		PlanRSS:     int64(col(func(r RedriveRun) float64 { return float64(r.PlanRSS) })),
		Journal:     int64(col(func(r RedriveRun) float64 { return float64(r.Journal) })),
		Records:     int(col(func(r RedriveRun) float64 { return float64(r.Records) })),
	}
	row("median", med)
	fmt.Fprintf(w, "\n(The median row's ratio is the ratio of the medians.)\n")
	ratio := col(func(r RedriveRun) float64 { return r.Raw.Seconds() / r.Apply.Seconds() })
	fmt.Fprintf(w, "\nRatio dlqctl apply/raw move loop, median of the %d per-run ratios: **%.2f×**. Target ≥ %.1f×: %s.\n", len(rd.Runs), ratio, targetRedriveRatio, verdict(ratio >= targetRedriveRatio))
	fmt.Fprintf(w, "CPU: raw loop %.2f s in the bench process + %.2f s in redis-server; dlqctl apply %.2f s + %.2f s in redis-server (medians).\n",
		med.RawCPU.Seconds(), med.RawServer.Seconds(), med.ApplyCPU.Seconds(), med.ApplyServer.Seconds())
	fmt.Fprintf(w, "Plan (`redrive plan`, not in the ratio): %.2f s median, %s entries/s; plan file %.1f MiB after approval. Journal: %.1f MiB, %.0f B and %.1f records per entry; %d batch(es) per apply.\n",
		med.Plan.Seconds(), group(n/med.Plan.Seconds()), float64(rd.Runs[0].PlanBytes)/(1<<20), float64(med.Journal)/(1<<20), float64(med.Journal)/n, float64(med.Records)/n, rd.Runs[0].Batches)
	rd.writePhases(w)
	rd.writeApplyCosts(w)
	for i, r := range rd.Runs {
		fmt.Fprintf(w, "Server time by command, run %d: raw loop: %s. Apply: %s.\n", i+1, r.RawCommands, r.ApplyCommands)
	}
	fmt.Fprintf(w, "Every run, both sides: the DLQ ended empty and each of the %s events was in its origin stream exactly once, with its fingerprint.\n", group(n))
	if len(rd.Profile) > 0 {
		fmt.Fprintf(w, "Profiles of one extra in-process `redrive apply`: %s\n", strings.Join(rd.Profile, ", "))
	}
}

func (rr *RateResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### rate — `--rate %d --burst %d` over %s entries\n\n", rr.Rate, rr.Burst, group(float64(rr.N)))
	fmt.Fprintf(w, "`%s`, approved, then `%s`; send times are the destination entries' stream IDs (milliseconds).\n\n", rr.Plan, rr.Apply2)
	lo, hi := float64(rr.Rate)*(1-rateTolerance), float64(rr.Rate)*(1+rateTolerance)
	limit := rr.Rate + rr.Burst
	fmt.Fprintln(w, "| entries | apply s | first → last send s | achieved entries/s | target | max in any 1 s window | target |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|---|--:|---|")
	fmt.Fprintf(w, "| %s | %.2f | %.3f | %.1f | %.0f–%.0f: %s | %d | ≤ %d: %s |\n", group(float64(rr.N)), rr.Apply.Seconds(), rr.Span.Seconds(), rr.Achieved,
		lo, hi, verdict(rr.Achieved >= lo && rr.Achieved <= hi), rr.MaxWindow, limit, verdict(rr.MaxWindow <= limit))
	fmt.Fprintf(w, "\nAll %s events arrived at the destination exactly once and the DLQ ended empty.\n", group(float64(rr.N)))
}

// applyPhases splits one apply's wall time by the times of its journal
// records (each write's first record carries the time the write began).
// With the publish pipeline a chunk's journal write runs while the chunk
// before it is on its round trip, so the moves are one phase: from the
// first intent to the last step record.
type applyPhases struct {
	// Before: process start to the run-start record: read and verify the
	// plan and its approval, connect, the staleness read of the whole DLQ.
	Before time.Duration
	// Start: run-start to the first intent: writing the run-start and
	// batch-start records, DLQ length and tail.
	Start time.Duration
	// Moving: the first intent to the last write of step records: every
	// chunk's journal writes and round trips, overlapped.
	Moving time.Duration
	// Reconcile: the last write of step records to batch-end: that write
	// and its sync, reconciling the batch (a read of the DLQ after its
	// tail) and its length.
	Reconcile time.Duration
	// After: batch-end to process exit: run-end, output, exit.
	After time.Duration
	// Writes is how many journal writes (one sync each) held step records.
	Writes int
}

// journalPhases reads the journal's record types and times; started is
// when the apply process was launched and wall its wall time.
func journalPhases(path string, started time.Time, wall time.Duration) (applyPhases, error) {
	var ph applyPhases
	data, err := os.ReadFile(path)
	if err != nil {
		return ph, err
	}
	var js journalScan
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if err := js.line(path, line); err != nil {
			return ph, err
		}
	}
	ph.Writes = js.writes
	if !js.signed {
		ph.Writes = js.stepWrites
	}
	if js.runStart.IsZero() || js.firstIntent.IsZero() || js.batchEnd.IsZero() {
		return ph, fmt.Errorf("journal %s: no run-start, intent or batch-end record", path)
	}
	ph.Before = js.runStart.Sub(started)
	ph.Start = js.firstIntent.Sub(js.runStart)
	ph.Moving = js.lastSteps.Sub(js.firstIntent)
	ph.Reconcile = max(0, js.batchEnd.Sub(js.lastSteps))
	ph.After = started.Add(wall).Sub(js.batchEnd)
	return ph, nil
}

// journalScan is what journalPhases has read so far: the times of the
// records that bound the phases, and the journal writes that held step
// records (counted by MAC when signed, estimated when not).
type journalScan struct {
	runStart, firstIntent, lastSteps, batchEnd, lastAt time.Time
	signed, stepsInWrite, prevStep                     bool
	writes                                             int // signed: writes (ended by a MAC) that held step records
	stepWrites                                         int // unsigned: writes that begin with a step record
}

// isStepRecord reports whether a journal record type is one of a move's
// steps.
func isStepRecord(t string) bool {
	switch t {
	case redrive.RecIntent, redrive.RecPublished, redrive.RecRemoved, redrive.RecAmbiguous,
		redrive.RecGone, redrive.RecSkipped, redrive.RecFailed:
		return true
	}
	return false
}

// line reads one journal line.
func (js *journalScan) line(path string, line []byte) error {
	// The encoder writes "type" then "at" first (redrive.Record's
	// field order): {"type":"intent","at":"2026-…Z",…
	typ, rest, ok := cutJSONString(line, `{"type":`)
	if !ok {
		return fmt.Errorf("journal %s: unexpected line %.80q", path, line)
	}
	// A step record after the first of its write carries no "at": it
	// was written at the time of the last record before it that has
	// one (a write can begin with a batch-start or batch-end, whose
	// time is when the engine made it, a moment before the write).
	atText, _, hasAt := cutJSONString(rest, `,"at":`)
	if hasAt {
		at, err := time.Parse(time.RFC3339Nano, atText)
		if err != nil {
			return err
		}
		js.lastAt = at
	} else if !isStepRecord(typ) {
		return fmt.Errorf("journal %s: no at in %.80q", path, line)
	}
	switch {
	case typ == redrive.RecRunStart:
		js.runStart = js.lastAt
	case isStepRecord(typ):
		if js.firstIntent.IsZero() && typ == redrive.RecIntent {
			js.firstIntent = js.lastAt
		}
		js.lastSteps = js.lastAt
		js.stepsInWrite = true
		// Unsigned (no MACs to end a write): a run of step records
		// begins with one that has a time, or follows a batch record;
		// a write that holds one batch's end between two such runs
		// counts twice, so this is an upper bound.
		if hasAt || !js.prevStep {
			js.stepWrites++
		}
	case typ == redrive.RecBatchEnd:
		js.batchEnd = js.lastAt
	}
	js.prevStep = isStepRecord(typ)
	// A signed journal's write ends with the line that carries its MAC.
	if bytes.Contains(line, []byte(`,"mac":`)) {
		js.signed = true
		if js.stepsInWrite {
			js.writes++
		}
		js.stepsInWrite = false
	}
	return nil
}

// cutJSONString reads the JSON string right after prefix at the start of b
// (no escapes expected) and returns it and what follows it.
func cutJSONString(b []byte, prefix string) (string, []byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(prefix+`"`))
	if !ok {
		return "", nil, false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 {
		return "", nil, false
	}
	return string(rest[:i]), rest[i+1:], true
}

// writePhases prints where the apply's wall time went, by journal record
// times (median per phase over the runs).
func (rd *Redrive) writePhases(w io.Writer) {
	if len(rd.Runs) == 0 || rd.Runs[0].Phases.Writes == 0 {
		return
	}
	med := func(f func(RedriveRun) float64) float64 {
		var xs []float64
		for _, r := range rd.Runs {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	ph := func(f func(applyPhases) time.Duration) float64 {
		return med(func(r RedriveRun) float64 { return f(r.Phases).Seconds() })
	}
	apply := med(func(r RedriveRun) float64 { return r.Apply.Seconds() })
	rawWall := med(func(r RedriveRun) float64 { return r.Raw.Seconds() })
	rawRead := med(func(r RedriveRun) float64 { return r.RawRead.Seconds() })
	thousands := float64(rd.N) / 1000
	rows := []struct {
		name string
		v    float64
	}{
		{"start-up to run-start: read and verify the plan and approval, connect, staleness read of the whole DLQ", ph(func(p applyPhases) time.Duration { return p.Before })},
		{"run-start to first intent: write and sync run-start and batch-start, DLQ length and tail", ph(func(p applyPhases) time.Duration { return p.Start })},
		{"first intent to the last write of step records: the pipelined chunks (journal writes overlapped with the round trips)", ph(func(p applyPhases) time.Duration { return p.Moving })},
		{"the last step records to batch-end: their write + sync, reconcile the batch", ph(func(p applyPhases) time.Duration { return p.Reconcile })},
		{"batch-end to exit: run-end, output, exit", ph(func(p applyPhases) time.Duration { return p.After })},
	}
	fmt.Fprintf(w, "\nWhere `redrive apply`'s wall time goes, from its journal's record times (median per phase; %.0f journal writes of step records; the raw loop's whole run is %.2f s, of which %.2f s reading the ids and %.2f s moving):\n\n",
		med(func(r RedriveRun) float64 { return float64(r.Phases.Writes) }), rawWall, rawRead, rawWall-rawRead)
	fmt.Fprintln(w, "| phase | s | share of apply |")
	fmt.Fprintln(w, "|---|--:|--:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.2f | %.0f %% |\n", r.name, r.v, 100*r.v/apply)
	}
	fmt.Fprintf(w, "\nMoving, per 1,000 entries: dlqctl %.1f ms, the raw loop %.1f ms.\n\n",
		1000*ph(func(p applyPhases) time.Duration { return p.Moving })/thousands, 1000*(rawWall-rawRead)/thousands)
}
