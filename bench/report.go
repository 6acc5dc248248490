package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/report"
)

// Targets (docs/performance.md).
const (
	targetRatio   = 0.8      // dlqctl entries/s ÷ raw entries/s, at least
	targetRSSKiB  = 64 << 10 // peak RSS of `dlqctl stats`, at most
	targetRSSFlat = 1.25     // peak RSS at the large N ÷ at the small N, at most
	// targetListRSSKiB: peak RSS of a piped `dlqctl list --limit 0`, at most.
	targetListRSSKiB = 100 << 10
	// targetFloorRatio: dlqctl stats entries/s ÷ the bare XRANGE loop's
	// (redis-stats), at least.
	targetFloorRatio = 0.7
)

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func group(x float64) string { return report.Thousands(int64(math.Round(x))) }

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**NOT met**"
}

// Ratios are per alternation: dlqctl entries/s ÷ raw entries/s.
func (t *Throughput) procRatios() []float64 {
	var out []float64
	for _, r := range t.Runs {
		out = append(out, r.Raw.Seconds()/r.Proc.Seconds())
	}
	return out
}

func (t *Throughput) inRatios() []float64 {
	var out []float64
	for _, r := range t.Runs {
		if r.In > 0 {
			out = append(out, r.Raw.Seconds()/r.In.Seconds())
		}
	}
	return out
}

func (t *Throughput) col(f func(Run) float64) []float64 {
	var out []float64
	for _, r := range t.Runs {
		out = append(out, f(r))
	}
	return out
}

// Write prints the results as Markdown, ready for docs/performance.md.
func (res *Results) Write(w io.Writer) {
	fmt.Fprintf(w, "Date %s · `nproc` %d · %s · %s", res.Started.Format("2006-01-02 15:04 UTC"), res.NumCPU, res.GoVersion, res.GOOSARCH)
	if res.Redis != "" {
		fmt.Fprintf(w, " · redis-server %s", res.Redis)
	}
	fmt.Fprintf(w, " · whole run %s\n\n", res.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "Reproduce: `%s`\n", res.Command)
	if t := res.RedisStats; t != nil {
		t.write(w, "redis-stats", "entries")
	}
	if len(res.RSS) > 0 {
		res.writeRSS(w)
	}
	if t := res.DirStats; t != nil {
		t.write(w, "dir-stats", "files")
	}
	if r := res.Redrive; r != nil {
		r.write(w)
	}
	if r := res.Rate; r != nil {
		r.write(w)
	}
	if p := res.Pulsar; p != nil {
		p.write(w)
	}
	if k := res.Kafka; k != nil {
		k.write(w)
	}
	if k := res.KafkaRedrive; k != nil {
		k.write(w)
	}
	if u := res.UI; u != nil {
		u.write(w)
	}
	if s := res.SQS; s != nil {
		s.write(w)
	}
	if len(res.SQSRSS) > 0 {
		res.writeSQSRSS(w)
	}
	if r := res.Discover; r != nil {
		r.write(w)
	}
	if rb := res.Rabbit; rb != nil {
		rb.write(w)
	}
	if nb := res.NATS; nb != nil {
		nb.write(w)
	}
	if sc := res.Scale; sc != nil {
		sc.write(w)
	}
	if len(res.Profiles) > 0 {
		fmt.Fprintf(w, "\nProfiles of one extra in-process dlqctl run: %s\n", strings.Join(res.Profiles, ", "))
	}
}

func (t *Throughput) write(w io.Writer, title, unit string) {
	fmt.Fprintf(w, "\n### %s — N = %s %s", title, group(float64(t.N)), unit)
	if t.Seed > 0 {
		fmt.Fprintf(w, " (seeded in %s)", t.Seed.Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "\n\n")
	fmt.Fprintf(w, "| run | raw s | raw %s/s | raw CPU s | dlqctl s | dlqctl %s/s | ratio | dlqctl CPU s | CPU ratio | dlqctl peak RSS MiB |", unit, unit)
	if t.InProcess {
		fmt.Fprintf(w, " in-process s | in-process %s/s | ratio |", unit)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	if t.InProcess {
		fmt.Fprint(w, "--:|--:|--:|")
	}
	fmt.Fprintln(w)
	row := func(name string, raw, rawCPU, proc, cpu, rss, in float64) {
		fmt.Fprintf(w, "| %s | %.2f | %s | %.2f | %.2f | %s | %.2f× | %.2f | %.2f× | %.1f |", name,
			raw, group(float64(t.N)/raw), rawCPU, proc, group(float64(t.N)/proc), raw/proc, cpu, rawCPU/cpu, rss)
		if t.InProcess {
			fmt.Fprintf(w, " %.2f | %s | %.2f× |", in, group(float64(t.N)/in), raw/in)
		}
		fmt.Fprintln(w)
	}
	for i, r := range t.Runs {
		row(fmt.Sprint(i+1), r.Raw.Seconds(), r.RawCPU.Seconds(), r.Proc.Seconds(), (r.ProcUser + r.ProcSys).Seconds(), mib(r.ProcMem.MaxRSS), r.In.Seconds())
	}
	row("median", median(t.col(func(r Run) float64 { return r.Raw.Seconds() })),
		median(t.col(func(r Run) float64 { return r.RawCPU.Seconds() })),
		median(t.col(func(r Run) float64 { return r.Proc.Seconds() })),
		median(t.col(func(r Run) float64 { return (r.ProcUser + r.ProcSys).Seconds() })),
		median(t.col(func(r Run) float64 { return mib(r.ProcMem.MaxRSS) })),
		median(t.col(func(r Run) float64 { return r.In.Seconds() })))
	fmt.Fprintf(w, "\n(The median row's ratios are ratios of the medians.)\n")
	pr := median(t.procRatios())
	fmt.Fprintf(w, "\nRatio dlqctl/raw, median of the %d per-run ratios: **%.2f×** as a subprocess", len(t.Runs), pr)
	if t.InProcess {
		fmt.Fprintf(w, ", **%.2f×** in-process", median(t.inRatios()))
	}
	fmt.Fprintf(w, ". Target ≥ %.1f×: %s.\n", targetRatio, verdict(pr >= targetRatio))
	server := t.Server
	if server == "" {
		server = "redis-server"
	}
	fmt.Fprintf(w, "CPU-time ratio (raw CPU ÷ dlqctl subprocess user+sys CPU, median): %.2f× — steadier than wall time on a shared machine; %s's own CPU is in neither.\n",
		median(t.col(func(r Run) float64 { return r.RawCPU.Seconds() / (r.ProcUser + r.ProcSys).Seconds() })), server)
	t.writeFloor(w)
	if t.InProcess && len(t.Runs) > 0 {
		n := float64(t.N)
		raw := "not measured"
		if t.Runs[0].RawAllocs > 0 {
			raw = fmt.Sprintf("%.0f objects / %.0f B", median(t.col(func(r Run) float64 { return float64(r.RawAllocs) / n })),
				median(t.col(func(r Run) float64 { return float64(r.RawBytes) / n })))
		}
		fmt.Fprintf(w, "Allocations per entry (median): raw %s; dlqctl in-process %.0f objects / %.0f B.\n", raw,
			median(t.col(func(r Run) float64 { return float64(r.InAllocs) / n })),
			median(t.col(func(r Run) float64 { return float64(r.InBytes) / n })))
	}
}

func field(ms []memSample, f func(memSample) int64) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, f(m))
	}
	return out
}

func mibRange(xs []int64) string {
	if len(xs) == 0 {
		return "—"
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if mib(hi)-mib(lo) < 0.05 {
		return fmt.Sprintf("%.1f", mib(hi))
	}
	return fmt.Sprintf("%.1f–%.1f", mib(lo), mib(hi))
}

func maxRSS(m memSample) int64 { return m.MaxRSS }
func anon(m memSample) int64   { return m.Anon }
func file(m memSample) int64   { return m.File }
func floor(m memSample) int64  { return m.Floor }

func (res *Results) writeRSS(w io.Writer) {
	fmt.Fprintf(w, "\n### redis-rss — peak memory of `dlqctl stats`, of a piped `dlqctl list --limit 0` and of the raw loop, each in its own process\n\n")
	fmt.Fprintln(w, "| N | process | runs | peak RSS (ru_maxrss) MiB | peak RssAnon MiB | peak RssFile MiB | wall s (median) | launcher floor MiB |")
	fmt.Fprintln(w, "|--:|---|--:|--:|--:|--:|--:|--:|")
	var largest []int64
	for _, p := range res.RSS {
		for _, side := range []struct {
			name string
			ms   []memSample
		}{{"dlqctl stats", p.Dlqctl}, {"dlqctl list --limit 0, piped (TSV)", p.List}, {"raw loop (bench/rawredis)", p.Raw}} {
			if len(side.ms) == 0 {
				continue
			}
			var walls []float64
			for _, m := range side.ms {
				walls = append(walls, m.Wall.Seconds())
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %.2f | %s |\n", group(float64(p.N)), side.name, len(side.ms),
				mibRange(field(side.ms, maxRSS)), mibRange(field(side.ms, anon)), mibRange(field(side.ms, file)), median(walls), mibRange(field(side.ms, floor)))
		}
		largest = append(largest, slices.Max(field(p.Dlqctl, maxRSS)))
	}
	top := slices.Max(largest)
	fmt.Fprintf(w, "\nTarget ≤ %d MiB (ru_maxrss of `dlqctl stats`): %s (largest %.1f MiB).", targetRSSKiB>>10, verdict(top <= targetRSSKiB), mib(top))
	if len(largest) >= 2 {
		a, b := largest[0], largest[len(largest)-1]
		growth := float64(b) / float64(a)
		fmt.Fprintf(w, " Flat (largest at N=%s ÷ largest at N=%s ≤ %.2f): %s (%.2f×, +%.1f MiB).",
			group(float64(res.RSS[len(res.RSS)-1].N)), group(float64(res.RSS[0].N)), targetRSSFlat, verdict(growth <= targetRSSFlat), growth, mib(b-a))
	}
	var lists []int64
	for _, p := range res.RSS {
		lists = append(lists, field(p.List, maxRSS)...)
	}
	if len(lists) > 0 {
		top := slices.Max(lists)
		fmt.Fprintf(w, " Piped list ≤ %d MiB: %s (largest %.1f MiB).", targetListRSSKiB>>10, verdict(top <= targetListRSSKiB), mib(top))
	}
	fmt.Fprintln(w, "\nRssAnon is the process's own memory (heap, stacks); RssFile is mostly its executable's pages mapped from the page cache, shared and reclaimable; both are sampled every 10 ms, so a peak shorter than that can be missed, while ru_maxrss cannot miss it.")
}

// writeFloor compares dlqctl with the floor, where it was measured: both
// whole processes, start to exit.
func (t *Throughput) writeFloor(w io.Writer) {
	if len(t.Runs) == 0 || t.Runs[0].Floor == 0 {
		return
	}
	ratio := median(t.col(func(r Run) float64 { return r.Floor.Seconds() / r.Proc.Seconds() }))
	fmt.Fprintf(w, "Against the floor, the bare XRANGE loop that decodes nothing (bench/rawredis … floor, a process of its own, start to exit): floor %.2f s (%.2f s CPU), dlqctl %.2f s, medians; dlqctl/floor, median of the per-run ratios (%s): **%.2f×**. Target ≥ %.1f×: %s. CPU-time ratio %.2f×.\n",
		median(t.col(func(r Run) float64 { return r.Floor.Seconds() })), median(t.col(func(r Run) float64 { return r.FloorCPU.Seconds() })),
		median(t.col(func(r Run) float64 { return r.Proc.Seconds() })), ratioList(t.col(func(r Run) float64 { return r.Floor.Seconds() / r.Proc.Seconds() })),
		ratio, targetFloorRatio, verdict(ratio >= targetFloorRatio),
		median(t.col(func(r Run) float64 { return r.FloorCPU.Seconds() / (r.ProcUser + r.ProcSys).Seconds() })))
}

// ratioList is "0.91×, 0.88×, …".
func ratioList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f×", x)
	}
	return strings.Join(parts, ", ")
}
