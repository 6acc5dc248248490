package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
)

// Case names.
const (
	caseRedisStats = "redis-stats"
	caseRedisRSS   = "redis-rss"
	caseDirStats   = "dir-stats"
	// Redrive and Pulsar cases: redrive.go, pulsar.go.
	caseRedisRedrive = "redis-redrive"
	caseRate         = "rate"
	casePulsarStats  = "pulsar-stats"
	caseKafkaStats   = "kafka-stats" // kafka.go
	caseSQSStats     = "sqs-stats"   // sqs.go
	caseSQSRSS       = "sqs-rss"     // sqsrss.go
	// caseRedriveScale: scale.go.
)

var allCases = []string{caseRedisStats, caseRedisRSS, caseDirStats, caseRedisRedrive, caseRate, caseRedriveScale, casePulsarStats, caseKafkaStats, caseKafkaRedrive, caseSQSStats, caseSQSRSS, caseRedisUI, caseRedisDiscover, caseRabbitStats, caseRabbitRedrive, caseNATSStats, caseNATSRedrive}

// Config is one benchmark run.
type Config struct {
	Cases []string
	N     int   // redis-stats entries
	DirN  int   // dir-stats files
	RSSN  []int // redis-rss sizes
	Runs  int   // alternations per throughput case
	// RedriveN is the redis-redrive DLQ's size, RateN the rate case's,
	// PulsarN the pulsar-stats topic's.
	RedriveN int
	// RedriveRamp is redis-redrive's --ramp: "" or "one" for one batch
	// of every entry, "default" for the plan's default ramp (the batches
	// a user gets without the flag), or sizes. RawChunk is how many moves
	// the raw loop sends per round trip (raw.MoveChunk when 0).
	RedriveRamp string
	RawChunk    int
	RateN       int
	PulsarN     int
	KafkaN      int // the kafka-stats dead-letter topic's records
	SQSN        int // the sqs-stats queue's messages
	// ScaleN is redrive-scale's larger size (it also runs ScaleN/10);
	// ScaleCompact seeds compact entries and checks the moves by count.
	ScaleN       int
	ScaleCompact bool
	// InProcess also times dlqctl through cmd.Execute in this process.
	InProcess bool
	// RawRSS also measures the raw loop's peak RSS in a child process
	// (bench/rawredis under bench/launcher).
	RawRSS bool
	// CPUProfile / MemProfile, when set, are file name prefixes: one extra
	// in-process dlqctl run per throughput case writes PREFIX-CASE.pprof.
	CPUProfile string
	MemProfile string
	// Dlqctl is a prebuilt binary; empty means build one with `go build`.
	Dlqctl string
	Log    io.Writer

	// KafkaRedriveN is the kafka-redrive dead-letter topic's records.
	KafkaRedriveN int
	// RabbitN and RabbitRedriveN size the RabbitMQ cases (rabbitmq.go).
	RabbitN, RabbitRedriveN int
	// NATSN and NATSRedriveN size the NATS cases (nats.go).
	NATSN, NATSRedriveN int
}

// Results is everything a run measured.
type Results struct {
	Started    time.Time
	Elapsed    time.Duration
	NumCPU     int
	GoVersion  string
	GOOSARCH   string
	Redis      string
	Command    string
	RedisStats *Throughput
	DirStats   *Throughput
	RSS        []RSSPoint
	Profiles   []string
	Redrive    *Redrive        // redis-redrive (redrive.go)
	Rate       *RateResult     // rate (redrive.go)
	Pulsar     *PulsarStats    // pulsar-stats (pulsar.go)
	Kafka      *KafkaStats     // kafka-stats (kafka.go)
	UI         *UIResult       // redis-ui (ui.go)
	Discover   *DiscoverResult // redis-discover (discover.go)
	SQS        *SQSStats       // sqs-stats (sqs.go)
	SQSRSS     []SQSRSSPoint   // sqs-rss (sqsrss.go)
	Scale      *Scale          // redrive-scale (scale.go)

	// KafkaRedrive is kafka-redrive (kafkaredrive.go).
	KafkaRedrive *KafkaRedrive
	// Rabbit is rabbitmq-stats and rabbitmq-redrive (rabbitmq.go).
	Rabbit *RabbitBench
	// NATS is nats-stats and nats-redrive (nats.go).
	NATS *NATSBench
}

// Throughput is one throughput case: Runs alternations of raw and dlqctl.
type Throughput struct {
	Case      string
	N         int
	Seed      time.Duration
	Runs      []Run
	InProcess bool
	// Server is the server whose own CPU is in neither side ("" means
	// redis-server).
	Server string
}

// Run is one alternation.
type Run struct {
	Raw       time.Duration
	RawCPU    time.Duration
	RawAllocs uint64
	RawBytes  uint64
	Proc      time.Duration
	ProcUser  time.Duration
	ProcSys   time.Duration
	ProcMem   memSample
	In        time.Duration
	InAllocs  uint64
	InBytes   uint64
	// Floor is the bare XRANGE loop as a process of its own, start to
	// exit, and its user+sys CPU (redis-stats only).
	Floor, FloorCPU time.Duration
}

// RSSPoint is the peak RSS of `dlqctl stats` and of the raw loop at N,
// one sample per run.
type RSSPoint struct {
	N      int
	Dlqctl []memSample
	Raw    []memSample // empty when not measured
	// List is `dlqctl list --limit 0` with its stdout a pipe (TSV).
	List []memSample
}

// memSample is one process's memory as the launcher saw it.
type memSample struct {
	Wall   time.Duration
	MaxRSS int64 // ru_maxrss, KiB
	Anon   int64 // largest sampled RssAnon, KiB
	File   int64 // largest sampled RssFile, KiB
	Floor  int64 // the launcher's own peak: MaxRSS cannot read below it
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "bench: "+format+"\n", args...)
	}
}

// Run runs the selected cases.
func (c Config) Run(ctx context.Context) (*Results, error) {
	if c.Runs < 1 {
		c.Runs = 1
	}
	res := &Results{
		Started: time.Now().UTC(), NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
		GOOSARCH: runtime.GOOS + "/" + runtime.GOARCH,
	}
	tmp, err := os.MkdirTemp("", "dlqctl-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	c.logf("building dlqctl, bench/launcher and bench/rawredis")
	h, err := buildHelpers(tmp, c.Dlqctl)
	if err != nil {
		return nil, err
	}
	d, err := newDlqctl(h, tmp)
	if err != nil {
		return nil, err
	}
	now := time.Now()

	for _, g := range c.groups(h, d, tmp, now, res) {
		if !slices.ContainsFunc(g.cases, func(x string) bool { return slices.Contains(c.Cases, x) }) {
			continue
		}
		if err := g.run(ctx); err != nil {
			return res, err
		}
	}
	res.Elapsed = time.Since(res.Started)
	return res, nil
}

// caseGroup is cases that share a server, and the function that runs
// whichever of them were selected.
type caseGroup struct {
	cases []string
	run   func(context.Context) error
}

// groups lists the case groups in the order Run runs them.
func (c Config) groups(h helpers, d *dlqctl, tmp string, now time.Time, res *Results) []caseGroup {
	return []caseGroup{
		{[]string{caseRedisStats, caseRedisRSS}, func(ctx context.Context) error { return c.runRedis(ctx, h, d, now, res) }},
		{[]string{caseDirStats}, func(ctx context.Context) error { return c.runDir(ctx, d, filepath.Join(tmp, "queue"), now, res) }},
		{[]string{caseRedisRedrive, caseRate}, func(ctx context.Context) error { return c.runRedrive(ctx, d, tmp, now, res) }},
		{[]string{caseRedriveScale}, func(ctx context.Context) error { return c.runScale(ctx, d, tmp, now, res) }},
		{[]string{casePulsarStats}, func(ctx context.Context) error { return c.runPulsar(ctx, d, now, res) }},
		{[]string{caseKafkaStats}, func(ctx context.Context) error { return c.runKafka(ctx, d, now, res) }},
		{[]string{caseKafkaRedrive}, func(ctx context.Context) error { return c.runKafkaRedrive(ctx, d, tmp, now, res) }},
		{[]string{caseRedisUI}, func(ctx context.Context) error { return c.runUI(ctx, d, now, res) }},
		{[]string{caseSQSStats}, func(ctx context.Context) error { return c.runSQS(ctx, d, now, res) }},
		{[]string{caseSQSRSS}, func(ctx context.Context) error { return c.runSQSRSS(ctx, d, now, res) }},
		{[]string{caseRedisDiscover}, func(ctx context.Context) error { return c.runDiscover(ctx, d, now, res) }},
		{[]string{caseRabbitStats, caseRabbitRedrive}, func(ctx context.Context) error { return c.runRabbit(ctx, d, tmp, now, res) }},
		{[]string{caseNATSStats, caseNATSRedrive}, func(ctx context.Context) error { return c.runNATS(ctx, d, tmp, now, res) }},
	}
}

func (c Config) runRedis(ctx context.Context, h helpers, d *dlqctl, now time.Time, res *Results) error {
	srv, rdb, stop, err := startRedis()
	if err != nil {
		return err
	}
	defer stop()
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				res.Redis = v
			}
		}
	}
	rs := &redisStreams{c: c, rdb: rdb, now: now, seeded: map[int]string{}}
	if slices.Contains(c.Cases, caseRedisStats) {
		if err := c.redisStats(ctx, h, d, srv, rs, res); err != nil {
			return err
		}
	}
	if slices.Contains(c.Cases, caseRedisRSS) {
		for _, n := range c.RSSN {
			pt, err := c.redisRSSPoint(ctx, h, d, srv, rs, n, res.RedisStats)
			if err != nil {
				return err
			}
			res.RSS = append(res.RSS, pt)
		}
	}
	return nil
}

// redisStreams seeds one stream per size, once: redis-stats and redis-rss
// share the streams of the sizes they both measure.
type redisStreams struct {
	c      Config
	rdb    *redis.Client
	now    time.Time
	seeded map[int]string
}

// seed returns the key of the stream of n entries and how long seeding it
// took (0 when it was seeded before).
func (rs *redisStreams) seed(ctx context.Context, n int) (string, time.Duration, error) {
	if k, ok := rs.seeded[n]; ok {
		return k, 0, nil
	}
	key := fmt.Sprintf("dlq:bench:%d", n)
	rs.c.logf("seeding %s with %d entries", key, n)
	start := time.Now()
	if err := seedStream(ctx, rs.rdb, key, n, rs.now); err != nil {
		return "", 0, err
	}
	rs.seeded[n] = key
	return key, time.Since(start), nil
}

// redisStats is redis-stats: alternately the raw XRANGE loop, the floor
// (the bare XRANGE loop as a process of its own) and dlqctl.
func (c Config) redisStats(ctx context.Context, h helpers, d *dlqctl, srv *redistest.Server, rs *redisStreams, res *Results) error {
	key, took, err := rs.seed(ctx, c.N)
	if err != nil {
		return err
	}
	source := srv.URL(0, key)
	t := &Throughput{Case: caseRedisStats, N: c.N, Seed: took, InProcess: c.InProcess}
	res.RedisStats = t
	for i := range c.Runs {
		var r Run
		raw, err := rawRedisScan(ctx, rs.rdb, key)
		if err != nil {
			return err
		}
		if raw.Count != c.N {
			return fmt.Errorf("raw redis loop read %d entries, want %d", raw.Count, c.N)
		}
		r.Raw, r.RawCPU, r.RawAllocs, r.RawBytes = raw.Wall, raw.CPU, raw.Allocs, raw.Bytes
		floor, err := rawRedisChild(ctx, h, srv.Addr(), key, c.N, "floor")
		if err != nil {
			return err
		}
		r.Floor, r.FloorCPU = floor.Wall, floor.User+floor.Sys
		if err := c.dlqctlRun(ctx, d, source, c.N, &r); err != nil {
			return err
		}
		t.Runs = append(t.Runs, r)
		c.logf("redis-stats run %d/%d: raw %s, floor %s, dlqctl %s (in-process %s)", i+1, c.Runs, r.Raw.Round(time.Millisecond), r.Floor.Round(time.Millisecond), r.Proc.Round(time.Millisecond), r.In.Round(time.Millisecond))
	}
	return c.profile(ctx, d, source, "redis", res)
}

// redisRSSPoint is redis-rss at n entries: the peak RSS of `dlqctl stats`
// (taken from stats when redis-stats measured this size), of `dlqctl
// list` into a pipe, and of the raw loop as a child when asked.
func (c Config) redisRSSPoint(ctx context.Context, h helpers, d *dlqctl, srv *redistest.Server, rs *redisStreams, n int, stats *Throughput) (RSSPoint, error) {
	pt := RSSPoint{N: n}
	key, _, err := rs.seed(ctx, n)
	if err != nil {
		return pt, err
	}
	if stats != nil && stats.N == n {
		// redis-stats measured this size already.
		for _, r := range stats.Runs {
			pt.Dlqctl = append(pt.Dlqctl, r.ProcMem)
		}
	} else {
		for range c.Runs {
			p, err := d.runProcess(ctx, srv.URL(0, key))
			if err != nil {
				return pt, err
			}
			if p.Total != n {
				return pt, fmt.Errorf("dlqctl stats counted %d entries, want %d", p.Total, n)
			}
			pt.Dlqctl = append(pt.Dlqctl, p.mem())
		}
	}
	for range c.Runs {
		m, err := d.runListPiped(ctx, srv.URL(0, key), n)
		if err != nil {
			return pt, err
		}
		pt.List = append(pt.List, m)
	}
	if c.RawRSS {
		for range c.Runs {
			l, err := rawRedisChild(ctx, h, srv.Addr(), key, n)
			if err != nil {
				return pt, err
			}
			pt.Raw = append(pt.Raw, memSample{Wall: l.Wall, MaxRSS: l.MaxRSS, Anon: l.PeakAnon, File: l.PeakFile, Floor: l.LauncherHWM})
		}
	}
	c.logf("redis-rss N=%d: dlqctl stats %v, list %v, raw %v", n, pt.Dlqctl, pt.List, pt.Raw)
	return pt, nil
}

// dlqctlRun times dlqctl as a subprocess, then in-process when asked.
func (c Config) dlqctlRun(ctx context.Context, d *dlqctl, source string, want int, r *Run) error {
	p, err := d.runProcess(ctx, source)
	if err != nil {
		return err
	}
	if p.Total != want {
		return fmt.Errorf("dlqctl stats counted %d entries, want %d", p.Total, want)
	}
	r.Proc, r.ProcUser, r.ProcSys, r.ProcMem = p.Wall, p.User, p.Sys, p.mem()
	if !c.InProcess {
		return nil
	}
	in, err := d.runInProcess(ctx, source, "", "")
	if err != nil {
		return err
	}
	if in.Total != want {
		return fmt.Errorf("in-process dlqctl stats counted %d entries, want %d", in.Total, want)
	}
	r.In, r.InAllocs, r.InBytes = in.Wall, in.Allocs, in.Bytes
	return nil
}

// profilePaths names the CPU and allocation profiles of one case
// (PREFIX-name.pprof, "" for a profile not asked for) and lists those
// that will be written.
func (c Config) profilePaths(name string) (cpu, mem string, paths []string) {
	if c.CPUProfile != "" {
		cpu = c.CPUProfile + "-" + name + ".pprof"
		paths = append(paths, cpu)
	}
	if c.MemProfile != "" {
		mem = c.MemProfile + "-" + name + ".pprof"
		paths = append(paths, mem)
	}
	return cpu, mem, paths
}

// profile runs dlqctl in-process once more with the CPU and/or allocation
// profile on.
func (c Config) profile(ctx context.Context, d *dlqctl, source, name string, res *Results) error {
	if c.CPUProfile == "" && c.MemProfile == "" {
		return nil
	}
	cpu, mem, paths := c.profilePaths(name)
	res.Profiles = append(res.Profiles, paths...)
	c.logf("profiling dlqctl stats on %s in-process", name)
	_, err := d.runInProcess(ctx, source, cpu, mem)
	return err
}

func (c Config) runDir(ctx context.Context, d *dlqctl, root string, now time.Time, res *Results) error {
	c.logf("writing %d envelope files into %s/error", c.DirN, root)
	start := time.Now()
	if err := seedDir(root, c.DirN, now); err != nil {
		return err
	}
	t := &Throughput{Case: caseDirStats, N: c.DirN, Seed: time.Since(start), InProcess: c.InProcess}
	res.DirStats = t
	source := "dir:" + root
	// Warm the page cache and both code paths once.
	if _, err := rawDirScan(root); err != nil {
		return err
	}
	var warm Run
	if err := c.dlqctlRun(ctx, d, source, c.DirN, &warm); err != nil {
		return err
	}
	for i := range c.Runs {
		var r Run
		raw, err := rawDirScan(root)
		if err != nil {
			return err
		}
		if raw.Count != c.DirN {
			return fmt.Errorf("raw dir loop read %d files, want %d", raw.Count, c.DirN)
		}
		r.Raw, r.RawCPU, r.RawAllocs, r.RawBytes = raw.Wall, raw.CPU, raw.Allocs, raw.Bytes
		if err := c.dlqctlRun(ctx, d, source, c.DirN, &r); err != nil {
			return err
		}
		t.Runs = append(t.Runs, r)
		c.logf("dir-stats run %d/%d: raw %s, dlqctl %s (in-process %s)", i+1, c.Runs, r.Raw.Round(time.Millisecond), r.Proc.Round(time.Millisecond), r.In.Round(time.Millisecond))
	}
	return c.profile(ctx, d, source, "dir", res)
}
