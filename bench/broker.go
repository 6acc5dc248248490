package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// The steps the broker cases (rabbitmq-*, nats-*) share: a stats case
// alternates a raw client's scan with `dlqctl stats`, a redrive case
// alternates a raw client's redrive with a planned, approved and
// unthrottled `dlqctl redrive apply`. What differs per broker (how a
// queue is seeded, emptied and checked) comes in as functions.

// brokerStats runs t.Case's alternations: scan (the raw client reading
// all of src's t.N messages, returning how many it read) timed with this
// process's CPU, then `dlqctl stats` on src as a subprocess and, when
// asked, in this process.
func (c Config) brokerStats(ctx context.Context, d *dlqctl, t *Throughput, src string, scan func() (int, error)) error {
	n := t.N
	for i := range c.Runs {
		var r Run
		cpu0, t0 := cpuTime(), time.Now()
		got, err := scan()
		r.Raw, r.RawCPU = time.Since(t0), cpuTime()-cpu0
		if err != nil || got != n {
			return fmt.Errorf("raw scan read %d of %d: %v", got, n, err)
		}
		if err := c.brokerStatsDlqctl(ctx, d, src, n, &r); err != nil {
			return err
		}
		t.Runs = append(t.Runs, r)
		c.logf("%s run %d/%d: raw %s, dlqctl %s", t.Case, i+1, c.Runs, r.Raw.Round(time.Millisecond), r.Proc.Round(time.Millisecond))
	}
	return nil
}

// brokerStatsDlqctl times `dlqctl stats` on src into r: as a subprocess
// (which must count n) and, when asked, in this process.
func (c Config) brokerStatsDlqctl(ctx context.Context, d *dlqctl, src string, n int, r *Run) error {
	p, err := d.runProcess(ctx, src)
	if err != nil {
		return err
	}
	if p.Total != n {
		return fmt.Errorf("dlqctl stats counted %d, want %d", p.Total, n)
	}
	r.Proc, r.ProcUser, r.ProcSys, r.ProcMem = p.Wall, p.User, p.Sys, p.mem()
	if c.InProcess {
		in, err := d.runInProcess(ctx, src, "", "")
		if err != nil {
			return err
		}
		r.In, r.InAllocs, r.InBytes = in.Wall, in.Allocs, in.Bytes
	}
	return nil
}

// brokerRedriveCase is one broker's redrive case: its name, its size, and
// the broker-specific steps around the shared ones. A nil step is skipped.
type brokerRedriveCase struct {
	name string
	n    int
	// src is the dlqctl side's source URL, shown how the report prints it.
	src, shown string
	// before runs at the start of each alternation; seedRaw fills the raw
	// side's DLQ; raw moves it and returns how many it moved; seedDlqctl
	// resets the origins after the raw side and fills the dlqctl side's
	// DLQ; after checks or resets the origins once dlqctl has applied.
	before, seedRaw, seedDlqctl, after func() error
	raw                                func() (int, error)
}

// brokerRedriveResult is where a broker's redrive case reports: its
// alternations and the plan and apply command lines of the first.
type brokerRedriveResult struct {
	runs        *[]BrokerRedriveRun
	plan, apply *string
}

// brokerRedrive runs bc's alternations: the raw redrive timed, then
// dlqctl's plan and approve and its timed unthrottled apply (journal on)
// in a directory of its own under tmp.
func (c Config) brokerRedrive(ctx context.Context, d *dlqctl, tmp string, bc brokerRedriveCase, out brokerRedriveResult) error {
	params := append([]string{"--rate", "0", "--ramp", strconv.Itoa(bc.n), "--settle", "0s", "--unverified-ok"}, everyEntry...)
	for i := range c.Runs {
		var r BrokerRedriveRun
		if err := runStep(bc.before); err != nil {
			return err
		}
		if err := c.brokerRedriveRaw(bc, &r); err != nil {
			return err
		}
		if err := runStep(bc.seedDlqctl); err != nil {
			return err
		}
		dir := filepath.Join(tmp, bc.name, fmt.Sprintf("run-%d", i+1))
		planCmd, applyCmd, err := d.brokerApply(ctx, bc.src, dir, bc.shown, bc.n, params, &r)
		if err != nil {
			return err
		}
		if *out.apply == "" {
			*out.plan, *out.apply = planCmd, applyCmd
		}
		if err := runStep(bc.after); err != nil {
			return err
		}
		*out.runs = append(*out.runs, r)
		c.logf("%s run %d/%d: raw %s, dlqctl plan %s, apply %s", bc.name, i+1, c.Runs,
			r.Raw.Round(time.Millisecond), r.Plan.Round(time.Millisecond), r.Apply.Round(time.Millisecond))
	}
	return nil
}

// brokerRedriveRaw seeds the raw side's DLQ and times its raw redrive into
// r, which must move all bc.n messages.
func (c Config) brokerRedriveRaw(bc brokerRedriveCase, r *BrokerRedriveRun) error {
	if err := runStep(bc.seedRaw); err != nil {
		return err
	}
	t0 := time.Now()
	moved, err := bc.raw()
	r.Raw = time.Since(t0)
	if err != nil || moved != bc.n {
		return fmt.Errorf("raw redrive moved %d of %d: %v", moved, bc.n, err)
	}
	return nil
}

// runStep runs an optional step.
func runStep(step func() error) error {
	if step == nil {
		return nil
	}
	return step()
}

// brokerCPUCase is a Java broker's stats case (kafka-stats, pulsar-stats):
// its raw loop's name and unit for the messages, the broker's process
// whose CPU each side costs, and where those CPU times go.
type brokerCPUCase struct {
	loop, unit string // "raw kafka loop", "records"
	pid        int
	scan       func() (rawRedisResult, error)
	// brokerRaw and brokerDlqctl receive the broker's CPU during each
	// raw pass and each dlqctl subprocess run.
	brokerRaw, brokerDlqctl *[]time.Duration
}

// brokerCPUStats runs t.Case's alternations: bc.scan in this process,
// then `dlqctl stats` on source as a subprocess and, when asked, in this
// process, each of which must count t.N; the broker's CPU is read around
// the first two.
func (c Config) brokerCPUStats(ctx context.Context, d *dlqctl, t *Throughput, source string, bc brokerCPUCase) error {
	n := t.N
	for i := range c.Runs {
		var r Run
		b0, _ := procCPU(bc.pid)
		raw, err := bc.scan()
		b1, _ := procCPU(bc.pid)
		if err != nil {
			return fmt.Errorf("%s: %v", bc.loop, err)
		}
		if raw.Count != n {
			return fmt.Errorf("%s read %d %s, want %d", bc.loop, raw.Count, bc.unit, n)
		}
		r.Raw, r.RawCPU, r.RawAllocs, r.RawBytes = raw.Wall, raw.CPU, raw.Allocs, raw.Bytes
		p, err := d.runProcess(ctx, source)
		b2, _ := procCPU(bc.pid)
		if err != nil {
			return err
		}
		if p.Total != n {
			return fmt.Errorf("dlqctl stats counted %d %s, want %d", p.Total, bc.unit, n)
		}
		r.Proc, r.ProcUser, r.ProcSys, r.ProcMem = p.Wall, p.User, p.Sys, p.mem()
		*bc.brokerRaw = append(*bc.brokerRaw, b1-b0)
		*bc.brokerDlqctl = append(*bc.brokerDlqctl, b2-b1)
		if err := c.inProcessStats(ctx, d, source, n, bc.unit, &r); err != nil {
			return err
		}
		t.Runs = append(t.Runs, r)
		c.logf("%s run %d/%d: raw %s, dlqctl %s (in-process %s)", t.Case, i+1, c.Runs, r.Raw.Round(time.Millisecond), r.Proc.Round(time.Millisecond), r.In.Round(time.Millisecond))
	}
	return nil
}

// inProcessStats times `dlqctl stats` on source in this process into r
// when asked; it must count n (unit names them in the error).
func (c Config) inProcessStats(ctx context.Context, d *dlqctl, source string, n int, unit string, r *Run) error {
	if !c.InProcess {
		return nil
	}
	in, err := d.runInProcess(ctx, source, "", "")
	if err != nil {
		return err
	}
	if in.Total != n {
		return fmt.Errorf("in-process dlqctl stats counted %d %s, want %d", in.Total, unit, n)
	}
	r.In, r.InAllocs, r.InBytes = in.Wall, in.Allocs, in.Bytes
	return nil
}
