package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/bench/rawrabbit"
	"github.com/dlqctl/dlqctl/redrive"
)

// The RabbitMQ cases (Debian's rabbitmq-server through
// backends/rabbitmq/rabbitmqtest):
//
//	rabbitmq-stats    a classic DLQ of -rabbitmq-n messages carrying x-death
//	                  and envelope headers; alternately rawrabbit.ScanAndReturn
//	                  (consume, json.Unmarshal and SHA-256, give back by
//	                  channel close) and `dlqctl stats -o json`.
//	rabbitmq-redrive  two DLQs of -rabbitmq-redrive-n messages each;
//	                  rawrabbit.Redrive (publish with confirms and mandatory,
//	                  then ack, 256 at a time) on one and an unthrottled
//	                  `dlqctl redrive apply` (journal on) on the other.
const (
	caseRabbitStats   = "rabbitmq-stats"
	caseRabbitRedrive = "rabbitmq-redrive"
	// targetRabbitRedriveRatio: dlqctl's unthrottled redrive at least this
	// share of the raw loop's messages/s.
	targetRabbitRedriveRatio = 0.7
	rabbitChunk              = 256
)

// RabbitBench is both RabbitMQ cases.
type RabbitBench struct {
	Server      string // the broker's version
	ServerStart time.Duration
	Stats       *Throughput
	Redrive     []BrokerRedriveRun
	RedriveN    int
	Plan, Apply string
}

// BrokerRedriveRun is one alternation of a broker's redrive case
// (rabbitmq-redrive, nats-redrive).
type BrokerRedriveRun struct {
	Raw, Plan, Apply time.Duration
	ApplyCPU         time.Duration
	ApplyRSS         int64 // KiB
}

func (r BrokerRedriveRun) ratio() float64 { return r.Raw.Seconds() / r.Apply.Seconds() }

// seedRabbit publishes n generated entries to queue as dead letters: the
// message_id is the event ID, the envelope fields are headers, and each
// carries an x-death entry and x-first-death-queue naming its origin.
func seedRabbit(ctx context.Context, ch *amqp.Channel, queue string, n int, now time.Time) error {
	if err := ch.Confirm(false); err != nil {
		return err
	}
	g := newGenerator(n, now)
	const window = 1000
	var pending []*amqp.DeferredConfirmation
	for i := range n {
		e := g.entry(i)
		h := amqp.Table{
			"fingerprint": e.Fingerprint, "key": e.Key, "last_error": e.LastError, "owner": e.Owner, "tenant": e.Tenant,
			"attempts": strconv.Itoa(e.Attempts),
			"x-death": []any{amqp.Table{"count": int64(1), "exchange": "", "queue": e.OriginStream, "reason": "rejected",
				"routing-keys": []any{e.OriginStream}, "time": e.DeadLetteredAt}},
			"x-first-death-queue": e.OriginStream, "x-first-death-reason": "rejected", "x-first-death-exchange": "",
		}
		if e.ErrorClass != "" {
			h["error_class"] = e.ErrorClass
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
			MessageId: e.EventID, ContentType: "application/json", DeliveryMode: amqp.Persistent, Headers: h, Body: e.Payload,
		})
		if err != nil {
			return err
		}
		pending = append(pending, dc)
		if len(pending) == window || i == n-1 {
			for _, dc := range pending {
				if ok, err := dc.WaitContext(ctx); err != nil || !ok {
					return fmt.Errorf("seed: confirm %v %v", ok, err)
				}
			}
			pending = pending[:0]
		}
	}
	return nil
}

func (c Config) runRabbit(ctx context.Context, d *dlqctl, tmp string, now time.Time, res *Results) error {
	c.logf("rabbitmq: starting the broker")
	start := time.Now()
	s, err := rabbitmqtest.StartProcess()
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Stop(); err != nil {
			c.logf("rabbitmq: %v", err)
		}
	}()
	rb := &RabbitBench{ServerStart: time.Since(start), RedriveN: c.RabbitRedriveN}
	res.Rabbit = rb
	conn, err := s.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	if v, ok := conn.Properties["version"].(string); ok {
		rb.Server = v
	}
	rs := rabbitSession{c: c, s: s, conn: conn, now: now}
	if contains(c.Cases, caseRabbitStats) {
		if err := rs.stats(ctx, d, rb); err != nil {
			return err
		}
	}
	if contains(c.Cases, caseRabbitRedrive) {
		if err := rs.redrive(ctx, d, tmp, rb); err != nil {
			return err
		}
		if err := rs.profileRedrive(ctx, d, tmp, res); err != nil {
			return err
		}
	}
	return nil
}

// profileRedrive, when a profile is asked for, runs one more unthrottled
// apply in this process on a freshly seeded DLQ, with the CPU and/or
// allocation profile on (PREFIX-rabbitmq-redrive.pprof).
func (rs rabbitSession) profileRedrive(ctx context.Context, d *dlqctl, tmp string, res *Results) error {
	if rs.c.CPUProfile == "" && rs.c.MemProfile == "" {
		return nil
	}
	cpu, mem, paths := rs.c.profilePaths(caseRabbitRedrive)
	res.Profiles = append(res.Profiles, paths...)
	n := rs.c.RabbitRedriveN
	if err := rs.declare(originStreams()...); err != nil {
		return err
	}
	if err := rs.seed(ctx, "bench-redrive-dlq", n); err != nil {
		return err
	}
	rs.c.logf("%s: profiling dlqctl redrive apply in-process", caseRabbitRedrive)
	src := rs.source("bench-redrive-dlq")
	params := append([]string{"--rate", "0", "--ramp", strconv.Itoa(n), "--settle", "0s", "--unverified-ok"}, everyEntry...)
	plan, _, err := d.planApprove(ctx, src, filepath.Join(tmp, caseRabbitRedrive, "profile"), params...)
	if err != nil {
		return err
	}
	_, out, err := d.execInProcess(ctx, map[string]string{"DLQCTL_APPROVAL_KEY": approvalKey}, d.applyArgs(src, plan), cpu, mem)
	if err != nil {
		return err
	}
	_, err = parseRun(out, n)
	return err
}

// rabbitSession is one started broker and the bench's connection to it.
type rabbitSession struct {
	c    Config
	s    *rabbitmqtest.Server
	conn *amqp.Connection
	now  time.Time
}

// source is dlqctl's source URL for queue.
func (rs rabbitSession) source(queue string) string {
	return strings.TrimSuffix(rs.s.URL(), "/") + "/?" + url.Values{"queue": {queue}, "admin": {rs.s.AdminURL()}}.Encode()
}

// declare declares the queues durable and empties them.
func (rs rabbitSession) declare(names ...string) error {
	ch, err := rs.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	for _, q := range names {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			return err
		}
		if _, err := ch.QueuePurge(q, false); err != nil {
			return err
		}
	}
	return nil
}

// seed declares queue empty and publishes n generated dead letters to it.
func (rs rabbitSession) seed(ctx context.Context, queue string, n int) error {
	if err := rs.declare(queue); err != nil {
		return err
	}
	ch, err := rs.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	st := time.Now()
	if err := seedRabbit(ctx, ch, queue, n, rs.now); err != nil {
		return err
	}
	rs.c.logf("rabbitmq: seeded %d messages into %s in %s", n, queue, time.Since(st).Round(time.Millisecond))
	return nil
}

// stats is rabbitmq-stats.
func (rs rabbitSession) stats(ctx context.Context, d *dlqctl, rb *RabbitBench) error {
	n := rs.c.RabbitN
	t := &Throughput{Case: caseRabbitStats, N: n, InProcess: rs.c.InProcess, Server: "rabbitmq-server"}
	rb.Stats = t
	st := time.Now()
	if err := rs.seed(ctx, "bench-stats-dlq", n); err != nil {
		return err
	}
	t.Seed = time.Since(st)
	return rs.c.brokerStats(ctx, d, t, rs.source("bench-stats-dlq"), func() (int, error) {
		return rawrabbit.ScanAndReturn(ctx, rs.s.URL(), "bench-stats-dlq")
	})
}

// redrive is rabbitmq-redrive.
func (rs rabbitSession) redrive(ctx context.Context, d *dlqctl, tmp string, rb *RabbitBench) error {
	n := rs.c.RabbitRedriveN
	if err := rs.declare(originStreams()...); err != nil {
		return err
	}
	resetOrigins := func() error { return rs.declare(originStreams()...) }
	bc := brokerRedriveCase{
		name: caseRabbitRedrive, n: n,
		src: rs.source("bench-redrive-dlq"), shown: "'amqp://…?queue=bench-redrive-dlq&admin=…'",
		seedRaw: func() error { return rs.seed(ctx, "bench-redrive-raw", n) },
		raw:     func() (int, error) { return rawrabbit.Redrive(ctx, rs.s.URL(), "bench-redrive-raw", rabbitChunk) },
		seedDlqctl: func() error {
			if err := resetOrigins(); err != nil {
				return err
			}
			return rs.seed(ctx, "bench-redrive-dlq", n)
		},
		after: resetOrigins,
	}
	return rs.c.brokerRedrive(ctx, d, tmp, bc, brokerRedriveResult{runs: &rb.Redrive, plan: &rb.Plan, apply: &rb.Apply})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (rb *RabbitBench) write(w io.Writer) {
	fmt.Fprintf(w, "\nRabbitMQ %s (Debian's package), started in %s.\n", rb.Server, rb.ServerStart.Round(100*time.Millisecond))
	if t := rb.Stats; t != nil {
		t.write(w, "rabbitmq-stats", "messages")
	}
	if len(rb.Redrive) == 0 {
		return
	}
	writeBrokerRedrive(w, "rabbitmq-redrive", "messages", rb.RedriveN, rb.Redrive, targetRabbitRedriveRatio, rb.Plan, rb.Apply)
}

// brokerApply plans and approves a redrive of every entry of src in dir,
// then times its unthrottled apply (journal on) into r, and checks that
// it moved n entries and left the DLQ empty. It returns the plan and
// apply command lines with src shown as shown.
func (d *dlqctl) brokerApply(ctx context.Context, src, dir, shown string, n int, params []string, r *BrokerRedriveRun) (string, string, error) {
	plan, lp, err := d.planApprove(ctx, src, dir, params...)
	if err != nil {
		return "", "", err
	}
	r.Plan = lp.Wall
	repl := []string{src, shown, plan, "p.json"}
	planCmd := d.commandLine(d.planArgs(src, plan, params...), repl...)
	applyCmd := "DLQCTL_APPROVAL_KEY=… " + d.commandLine(d.applyArgs(src, plan), repl...)
	la, err := d.launchArgs(ctx, approvalEnv, d.applyArgs(src, plan)...)
	if err != nil {
		return "", "", err
	}
	r.Apply, r.ApplyCPU, r.ApplyRSS = la.Wall, la.User+la.Sys, la.MaxRSS
	if _, err := parseRun(la.Stdout, n); err != nil {
		return "", "", err
	}
	if _, _, err := journalSize(redrive.DefaultJournalPath(plan)); err != nil {
		return "", "", err
	}
	return planCmd, applyCmd, checkDrained(ctx, d, src)
}

// writeBrokerRedrive is the report of a broker's redrive case: one row per
// alternation, the median ratio against its target, and the commands.
func writeBrokerRedrive(w io.Writer, title, unit string, n int, runs []BrokerRedriveRun, target float64, plan, apply string) {
	fmt.Fprintf(w, "\n### %s — N = %s %s\n\n", title, group(float64(n)), unit)
	fmt.Fprintf(w, "| run | raw s | raw %s/s | dlqctl plan s | dlqctl apply s | apply %s/s | ratio | apply CPU s | apply peak RSS MiB |\n", unit, unit)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	var ratios []float64
	for i, r := range runs {
		fmt.Fprintf(w, "| %d | %.2f | %s | %.2f | %.2f | %s | %.2f× | %.2f | %.0f |\n", i+1, r.Raw.Seconds(), group(float64(n)/r.Raw.Seconds()),
			r.Plan.Seconds(), r.Apply.Seconds(), group(float64(n)/r.Apply.Seconds()), r.ratio(), r.ApplyCPU.Seconds(), mib(r.ApplyRSS))
		ratios = append(ratios, r.ratio())
	}
	fmt.Fprintf(w, "\nRatio apply/raw (%s/s), median of the %d runs: **%.2f×**. Target ≥ %.1f×: %s.\n",
		unit, len(ratios), median(ratios), target, verdict(median(ratios) >= target))
	fmt.Fprintf(w, "dlqctl: `%s` then `%s` (timed: the apply process, journal on).\n", plan, apply)
}
