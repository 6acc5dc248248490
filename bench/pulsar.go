package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backends/pulsar/pulsartest"
	"github.com/dlqctl/dlqctl/bench/rawpulsar"
)

// PulsarStats is the pulsar-stats case: a throughput case like redis-stats
// on a Pulsar DLQ topic, plus the broker's own CPU.
type PulsarStats struct {
	T            *Throughput
	Version      string
	BrokerStart  time.Duration
	Produce      time.Duration
	Batches      int64           // entries (batches) in the topic
	BrokerRaw    []time.Duration // broker CPU during each raw pass
	BrokerDlqctl []time.Duration // broker CPU during each dlqctl subprocess
	Command      string
}

// producePulsar sends n generated entries to topic with a batching
// producer, as a consumer's DLQ producer would write them.
func producePulsar(ctx context.Context, c pulsar.Client, topic string, n int, now time.Time) error {
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 10 * time.Millisecond, MaxPendingMessages: 5000})
	if err != nil {
		return err
	}
	defer p.Close()
	g := newGenerator(n, now)
	errc := make(chan error, n)
	for i := range n {
		e := g.entry(i)
		props := map[string]string{
			"event_id":          e.EventID,
			"fingerprint":       e.Fingerprint,
			"REAL_TOPIC":        "persistent://public/default/" + e.OriginStream,
			"ORIGIN_MESSAGE_ID": fmt.Sprintf("%d:%d:-1:-1", 100+i/50000, i%50000),
			"RECONSUMETIMES":    strconv.Itoa(e.Attempts),
			"last_error":        e.LastError,
			"first_received_at": e.FirstReceivedAt.Format(time.RFC3339),
			"dead_lettered_at":  e.DeadLetteredAt.Format(time.RFC3339),
			"content_type":      "application/json",
			"owner":             e.Owner,
			"schema_info":       "orders.v3",
			"origin_group":      e.OriginGroup,
			"tenant":            e.Tenant,
		}
		if e.ErrorClass != "" {
			props["error_class"] = e.ErrorClass
		}
		if !e.RecoverBy.IsZero() {
			props["recover_by"] = e.RecoverBy.Format(time.RFC3339)
		}
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: e.Payload, Key: e.Key, Properties: props},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errc <- err })
	}
	if err := p.Flush(); err != nil {
		return err
	}
	for range n {
		if err := <-errc; err != nil {
			return err
		}
	}
	return nil
}

// procCPU is the user+system CPU of process pid so far, from
// /proc/PID/stat (clock ticks of 1/100 s, Linux's USER_HZ).
func procCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// rawPulsarScan times one pass of rawpulsar.ReadLoop in this process, with
// a client of its own, as a program would.
func rawPulsarScan(ctx context.Context, serviceURL, topic string) (rawRedisResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	c, err := rawpulsar.NewClient(serviceURL)
	if err != nil {
		return rawRedisResult{}, err
	}
	n, err := rawpulsar.ReadLoop(ctx, c, topic)
	c.Close()
	wall, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	return rawRedisResult{Wall: wall, CPU: cpu, Count: n, Allocs: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}, err
}

func (c Config) runPulsar(ctx context.Context, d *dlqctl, now time.Time, res *Results) error {
	n := c.PulsarN
	c.logf("pulsar-stats: starting a standalone Pulsar broker")
	start := time.Now()
	b, err := pulsartest.StartProcess()
	if err != nil {
		return err
	}
	defer func() {
		c.logf("pulsar-stats: stopping the broker")
		if err := b.Stop(); err != nil {
			c.logf("pulsar-stats: %v", err)
		}
	}()
	ps := &PulsarStats{BrokerStart: time.Since(start)}
	if v, err := b.Admin(ctx, "GET", "/admin/v2/brokers/version", nil); err == nil {
		ps.Version = strings.Trim(strings.TrimSpace(string(v)), `"`)
	}
	topic := fmt.Sprintf("persistent://public/default/bench-dlq-%d", time.Now().UnixNano())
	client, err := rawpulsar.NewClient(b.ServiceURL())
	if err != nil {
		return err
	}
	c.logf("pulsar-stats: producing %d messages to %s (batching)", n, topic)
	start = time.Now()
	err = producePulsar(ctx, client, topic, n, now)
	client.Close()
	if err != nil {
		return fmt.Errorf("produce: %v", err)
	}
	ps.Produce = time.Since(start)
	source := b.ServiceURL() + "?" + url.Values{"topic": {topic}, "admin": {b.AdminURL()}}.Encode()
	ps.Command = d.commandLine(d.args(source), source, "'pulsar://127.0.0.1:PORT?topic=…&admin=http://127.0.0.1:PORT'")
	t := &Throughput{Case: casePulsarStats, N: n, Seed: ps.Produce, InProcess: c.InProcess, Server: "the broker"}
	ps.T = t
	res.Pulsar = ps

	// Warm-up: the first dlqctl run creates the dlqctl subscription at the
	// earliest message; both sides warm the broker's caches.
	c.logf("pulsar-stats: warm-up (the first dlqctl run creates the subscription)")
	if raw, err := rawPulsarScan(ctx, b.ServiceURL(), topic); err != nil || raw.Count != n {
		return fmt.Errorf("raw pulsar loop (warm-up) read %d messages, want %d: %v", raw.Count, n, err)
	}
	var warm Run
	if err := c.dlqctlRun(ctx, d, source, n, &warm); err != nil {
		return err
	}
	if st, err := b.Admin(ctx, "GET", "/admin/v2/persistent/public/default/"+strings.TrimPrefix(topic, "persistent://public/default/")+"/internalStats", nil); err == nil {
		if i := strings.Index(string(st), `"numberOfEntries":`); i >= 0 {
			rest := string(st)[i+len(`"numberOfEntries":`):]
			if j := strings.IndexAny(rest, ",}"); j > 0 {
				ps.Batches, _ = strconv.ParseInt(strings.TrimSpace(rest[:j]), 10, 64)
			}
		}
	}

	bc := brokerCPUCase{loop: "raw pulsar loop", unit: "messages", pid: b.PID(),
		scan:      func() (rawRedisResult, error) { return rawPulsarScan(ctx, b.ServiceURL(), topic) },
		brokerRaw: &ps.BrokerRaw, brokerDlqctl: &ps.BrokerDlqctl}
	if err := c.brokerCPUStats(ctx, d, t, source, bc); err != nil {
		return err
	}
	return c.profile(ctx, d, source, "pulsar", res)
}

func (ps *PulsarStats) write(w io.Writer) {
	ps.T.write(w, "pulsar-stats", "messages")
	fmt.Fprintf(w, "Broker: Apache Pulsar %s standalone (backends/pulsar/pulsartest, started in %.1fs); the topic holds %s messages in %d entries (batches), produced in %.1fs by a batching producer.\n",
		firstNonEmptyStr(ps.Version, "?"), ps.BrokerStart.Seconds(), group(float64(ps.T.N)), ps.Batches, ps.Produce.Seconds())
	fmt.Fprintf(w, "dlqctl: `%s`, after one warm-up run of each side (dlqctl's first run creates the `dlqctl` subscription at the earliest message).\n", ps.Command)
	if len(ps.BrokerRaw) > 0 {
		var r, d []float64
		for i := range ps.BrokerRaw {
			r = append(r, ps.BrokerRaw[i].Seconds())
			d = append(d, ps.BrokerDlqctl[i].Seconds())
		}
		fmt.Fprintf(w, "Broker CPU (the JVM's user+sys, /proc), median: %.2f s during a raw pass, %.2f s during a dlqctl subprocess run.\n", median(r), median(d))
	}
	peak := slicesMax(ps.T.col(func(r Run) float64 { return mib(r.ProcMem.MaxRSS) }))
	fmt.Fprintf(w, "Peak RSS of `dlqctl stats` (ru_maxrss, via bench/launcher): %.1f MiB at most over the runs.\n", peak)
}

func firstNonEmptyStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func slicesMax(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
