package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	ns := natsSession{c: c, url: s.URL(), js: js, now: now}
	if contains(c.Cases, caseNATSStats) {
		if err := ns.stats(ctx, d, nb); err != nil {
			return err
		}
	}
	if contains(c.Cases, caseNATSRedrive) {
		if err := ns.redrive(ctx, d, tmp, nb); err != nil {
			return err
		}
	}
	return nil
}

// natsSession is one started nats-server and the bench's JetStream
// client of it.
type natsSession struct {
	c   Config
	url string
	js  jetstream.JetStream
	now time.Time
}

// source is dlqctl's source URL for the copy stream dlq.
func (ns natsSession) source(dlq string) string { return ns.url + "?stream=" + dlq }

// fresh (re)creates the copy stream dlq, empty.
func (ns natsSession) fresh(ctx context.Context, dlq string) error {
	if err := ns.js.DeleteStream(ctx, dlq); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err := ns.js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true})
	return err
}

// seed (re)creates the copy stream dlq and publishes n generated copies.
func (ns natsSession) seed(ctx context.Context, dlq string, n int) error {
	if err := ns.fresh(ctx, dlq); err != nil {
		return err
	}
	st := time.Now()
	if err := seedNATS(ctx, ns.js, dlq, n, ns.now); err != nil {
		return err
	}
	ns.c.logf("nats: seeded %d copies into %s in %s", n, dlq, time.Since(st).Round(time.Millisecond))
	return nil
}

// stats is nats-stats.
func (ns natsSession) stats(ctx context.Context, d *dlqctl, nb *NATSBench) error {
	n := ns.c.NATSN
	t := &Throughput{Case: caseNATSStats, N: n, InProcess: ns.c.InProcess, Server: "nats-server"}
	nb.Stats = t
	st := time.Now()
	if err := ns.seed(ctx, "BENCH_STATS_DLQ", n); err != nil {
		return err
	}
	t.Seed = time.Since(st)
	return ns.c.brokerStats(ctx, d, t, ns.source("BENCH_STATS_DLQ"), func() (int, error) {
		return rawnats.Scan(ctx, ns.js, "BENCH_STATS_DLQ")
	})
}

// redrive is nats-redrive. The origins stream takes every origin subject;
// it is emptied before each side so both publish to the same state.
func (ns natsSession) redrive(ctx context.Context, d *dlqctl, tmp string, nb *NATSBench) error {
	n := ns.c.NATSRedriveN
	bc := brokerRedriveCase{
		name: caseNATSRedrive, n: n,
		src: ns.source("BENCH_REDRIVE_DLQ"), shown: "'nats://…?stream=BENCH_REDRIVE_DLQ'",
		before: func() error {
			if err := ns.js.DeleteStream(ctx, natsOrigins); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return err
			}
			_, err := ns.js.CreateStream(ctx, jetstream.StreamConfig{Name: natsOrigins, Subjects: originStreams()})
			return err
		},
		seedRaw: func() error { return ns.seed(ctx, "BENCH_RAW_DLQ", n) },
		raw: func() (int, error) {
			return rawnats.Redrive(ctx, ns.js, "BENCH_RAW_DLQ", natsdlq.HeaderOriginalSubject)
		},
		seedDlqctl: func() error {
			if err := purge(ctx, ns.js, natsOrigins); err != nil {
				return err
			}
			return ns.seed(ctx, "BENCH_REDRIVE_DLQ", n)
		},
		after: func() error { return ns.checkOrigins(ctx, n) },
	}
	return ns.c.brokerRedrive(ctx, d, tmp, bc, brokerRedriveResult{runs: &nb.Redrive, plan: &nb.Plan, apply: &nb.Apply})
}

// checkOrigins checks that dlqctl's apply left n messages in the origins
// stream.
func (ns natsSession) checkOrigins(ctx context.Context, n int) error {
	in, err := ns.js.Stream(ctx, natsOrigins)
	if err != nil {
		return err
	}
	info, err := in.Info(ctx)
	if err != nil {
		return fmt.Errorf("the origins stream after the apply: %w", err)
	}
	if info.State.Msgs != uint64(n) {
		return fmt.Errorf("the origins stream holds %d messages after the apply, want %d", info.State.Msgs, n)
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
