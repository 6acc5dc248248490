package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/bench/rawnats"
)

// The NATS JetStream cases (nats-server built by scripts/nats.sh, through
// backends/nats/natstest), on streams of dead-letter copies (the copy
// shape, docs/nats.md):
//
//	nats-stats    a DLQ stream of -nats-n copies carrying the envelope
//	              headers; alternately rawnats.Scan (an ordered consumer,
//	              json.Unmarshal and SHA-256 of each body, two headers read)
//	              and `dlqctl stats -o json`.
//	nats-redrive  two DLQ streams of -nats-redrive-n copies each;
//	              rawnats.Redrive (publish with ack, then delete by
//	              sequence, one message after another) on one and an
//	              unthrottled `dlqctl redrive apply` (journal on) on the
//	              other.
const (
	caseNATSStats   = "nats-stats"
	caseNATSRedrive = "nats-redrive"
	// targetNATSRedriveRatio: dlqctl's unthrottled redrive at least this
	// share of the raw loop's messages/s.
	targetNATSRedriveRatio = 0.6
	natsOrigins            = "BENCH_ORIGINS"
)

// NATSBench is both NATS cases.
type NATSBench struct {
	Server      string // nats-server's version
	ServerStart time.Duration
	Stats       *Throughput
	Redrive     []BrokerRedriveRun
	RedriveN    int
	Plan, Apply string
}

// seedNATS publishes n generated entries to the copy stream dlq as a
// consumer would dead-letter them: the envelope fields as headers, the
// origin (a subject of the origins stream) in x-original-subject, and a
// Nats-Msg-Id of the copy's own.
func seedNATS(ctx context.Context, js jetstream.JetStream, dlq string, n int, now time.Time) error {
	g := newGenerator(n, now)
	for i := range n {
		e := g.entry(i)
		h := nats.Header{}
		h.Set("event_id", e.EventID)
		h.Set(natsdlq.HeaderOriginalSubject, e.OriginStream)
		h.Set("fingerprint", e.Fingerprint)
		h.Set("key", e.Key)
		h.Set("last_error", e.LastError)
		h.Set("attempts", strconv.Itoa(e.Attempts))
		h.Set("dead_lettered_at", e.DeadLetteredAt.Format(time.RFC3339))
		h.Set("owner", e.Owner)
		h.Set("tenant", e.Tenant)
		if e.ErrorClass != "" {
			h.Set("error_class", e.ErrorClass)
		}
		h.Set(nats.MsgIdHdr, fmt.Sprintf("dead:%s:%d", dlq, i))
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: "dlq." + dlq + ".x", Header: h, Data: e.Payload}); err != nil {
			return err
		}
		// A window of 1,000 unacked publishes: more stalls the client on a
		// loaded machine.
		if (i+1)%1000 == 0 || i == n-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return fmt.Errorf("seed %s: acks did not arrive in a minute", dlq)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func (c Config) runNATS(ctx context.Context, d *dlqctl, tmp string, now time.Time, res *Results) error {
	c.logf("nats: starting nats-server")
	start := time.Now()
	s, err := natstest.StartProcess()
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Stop(); err != nil {
			c.logf("nats: %v", err)
		}
	}()
	nb := &NATSBench{ServerStart: time.Since(start), RedriveN: c.NATSRedriveN}
	res.NATS = nb
	nc, err := nats.Connect(s.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	nb.Server = nc.ConnectedServerVersion()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// fresh (re)creates the copy stream dlq, empty.
	fresh := func(dlq string) error {
		if err := js.DeleteStream(ctx, dlq); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true})
		return err
	}
	seed := func(dlq string, n int) error {
		if err := fresh(dlq); err != nil {
			return err
		}
		st := time.Now()
		if err := seedNATS(ctx, js, dlq, n, now); err != nil {
			return err
		}
		c.logf("nats: seeded %d copies into %s in %s", n, dlq, time.Since(st).Round(time.Millisecond))
		return nil
	}
	source := func(dlq string) string { return s.URL() + "?stream=" + dlq }
	if contains(c.Cases, caseNATSStats) {
		n := c.NATSN
		t := &Throughput{Case: caseNATSStats, N: n, InProcess: c.InProcess, Server: "nats-server"}
		nb.Stats = t
		st := time.Now()
		if err := seed("BENCH_STATS_DLQ", n); err != nil {
			return err
		}
		t.Seed = time.Since(st)
		src := source("BENCH_STATS_DLQ")
		for i := range c.Runs {
			var r Run
			cpu0, t0 := cpuTime(), time.Now()
			got, err := rawnats.Scan(ctx, js, "BENCH_STATS_DLQ")
			r.Raw, r.RawCPU = time.Since(t0), cpuTime()-cpu0
			if err != nil || got != n {
				return fmt.Errorf("raw scan read %d of %d: %v", got, n, err)
			}
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
			t.Runs = append(t.Runs, r)
			c.logf("nats-stats run %d/%d: raw %s, dlqctl %s", i+1, c.Runs, r.Raw.Round(time.Millisecond), r.Proc.Round(time.Millisecond))
		}
	}
	if contains(c.Cases, caseNATSRedrive) {
		n := c.NATSRedriveN
		params := append([]string{"--rate", "0", "--ramp", strconv.Itoa(n), "--settle", "0s", "--unverified-ok"}, everyEntry...)
		for i := range c.Runs {
			// The origins stream takes every origin subject; emptied
			// before each side so both publish to the same state.
			if err := js.DeleteStream(ctx, natsOrigins); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return err
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: natsOrigins, Subjects: originStreams()}); err != nil {
				return err
			}
			var r BrokerRedriveRun
			if err := seed("BENCH_RAW_DLQ", n); err != nil {
				return err
			}
			t0 := time.Now()
			moved, err := rawnats.Redrive(ctx, js, "BENCH_RAW_DLQ", natsdlq.HeaderOriginalSubject)
			r.Raw = time.Since(t0)
			if err != nil || moved != n {
				return fmt.Errorf("raw redrive moved %d of %d: %v", moved, n, err)
			}
			if err := purge(ctx, js, natsOrigins); err != nil {
				return err
			}
			if err := seed("BENCH_REDRIVE_DLQ", n); err != nil {
				return err
			}
			src := source("BENCH_REDRIVE_DLQ")
			dir := filepath.Join(tmp, "nats-redrive", fmt.Sprintf("run-%d", i+1))
			planCmd, applyCmd, err := d.brokerApply(ctx, src, dir, "'nats://…?stream=BENCH_REDRIVE_DLQ'", n, params, &r)
			if err != nil {
				return err
			}
			if nb.Apply == "" {
				nb.Plan, nb.Apply = planCmd, applyCmd
			}
			if in, err := js.Stream(ctx, natsOrigins); err != nil {
				return err
			} else if info, err := in.Info(ctx); err != nil || info.State.Msgs != uint64(n) {
				return fmt.Errorf("the origins stream holds %d messages after the apply, want %d (%v)", info.State.Msgs, n, err)
			}
			nb.Redrive = append(nb.Redrive, r)
			c.logf("nats-redrive run %d/%d: raw %s, dlqctl plan %s, apply %s", i+1, c.Runs,
				r.Raw.Round(time.Millisecond), r.Plan.Round(time.Millisecond), r.Apply.Round(time.Millisecond))
		}
	}
	return nil
}

func purge(ctx context.Context, js jetstream.JetStream, stream string) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	return st.Purge(ctx)
}

func (nb *NATSBench) write(w io.Writer) {
	fmt.Fprintf(w, "\nnats-server %s (scripts/nats.sh), started in %s.\n", nb.Server, nb.ServerStart.Round(100*time.Millisecond))
	if t := nb.Stats; t != nil {
		t.write(w, "nats-stats", "copies")
	}
	if len(nb.Redrive) > 0 {
		writeBrokerRedrive(w, "nats-redrive", "copies", nb.RedriveN, nb.Redrive, targetNATSRedriveRatio, nb.Plan, nb.Apply)
	}
}
