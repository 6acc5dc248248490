package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backends/kafka/kafkatest"
	"github.com/dlqctl/dlqctl/bench/rawkafka"
	"github.com/dlqctl/dlqctl/redrive"
)

// targetKafkaRedriveRatio: an unthrottled transactional redrive at least
// this fast against the raw transactional loop (issue 11).
const targetKafkaRedriveRatio = 0.5

// The kafka-redrive case: an unthrottled transactional `dlqctl redrive
// apply` (journal on) of a Spring dead-letter topic against
// rawkafka.TxnLoop, which redrives the same records in transactions of the
// same size, with a state record per entry as dlqctl writes.
const (
	caseKafkaRedrive = "kafka-redrive"
	// kafkaRedriveChunk is dlqctl's unthrottled chunk (redrive.Engine's
	// chunkSize): one transaction each.
	kafkaRedriveChunk = 256
	// kafkaOriginPartitions: produceKafka's headers name original
	// partitions 0-5.
	kafkaOriginPartitions = 6
)

// KafkaRedrive is the kafka-redrive case.
type KafkaRedrive struct {
	N           int
	BrokerStart time.Duration
	Runs        []KafkaRedriveRun
	Plan, Apply string // command lines with placeholders
}

// KafkaRedriveRun is one alternation, each side on a DLT of its own.
type KafkaRedriveRun struct {
	Raw, RawCPU, RawRead time.Duration
	RawTxns              int
	Plan                 time.Duration
	Apply, ApplyCPU      time.Duration
	ApplyRSS             int64 // KiB
	Journal              int64 // bytes
	Batches              int
	BrokerRaw, BrokerApp time.Duration
}

func (r KafkaRedriveRun) ratio() float64 { return r.Raw.Seconds() / r.Apply.Seconds() }

func (c Config) runKafkaRedrive(ctx context.Context, d *dlqctl, tmp string, now time.Time, res *Results) error {
	n := c.KafkaRedriveN
	b, ready, stop, err := c.startKafka("kafka-redrive")
	if err != nil {
		return err
	}
	defer stop()
	kr := &KafkaRedrive{N: n, BrokerStart: ready}
	res.KafkaRedrive = kr
	if err := createKafkaTopics(ctx, b.Bootstrap(), kafkaOriginPartitions, originStreams()...); err != nil {
		return err
	}
	kc := kafkaRedriveRun{c: c, d: d, b: b, n: n, now: now, work: filepath.Join(tmp, "kafka-redrive"),
		params: append([]string{"--rate", "0", "--ramp", strconv.Itoa(n), "--settle", "0s", "--unverified-ok"}, everyEntry...)}
	for i := range c.Runs {
		var r KafkaRedriveRun
		suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
		rawDLT, dlqDLT := "raw-"+suffix+".DLT", "dlqctl-"+suffix+".DLT"
		c.logf("kafka-redrive run %d/%d: producing %d records twice", i+1, c.Runs, n)
		for _, t := range []string{rawDLT, dlqDLT} {
			if err := produceKafka(ctx, b.Bootstrap(), t, n, now); err != nil {
				return fmt.Errorf("produce to %s: %v\nbroker log:\n%s", t, err, b.LogTail(30))
			}
		}
		if err := kc.raw(ctx, rawDLT, &r); err != nil {
			return err
		}
		if err := kc.dlqctl(ctx, dlqDLT, fmt.Sprintf("run-%d", i+1), kr, &r); err != nil {
			return err
		}
		kr.Runs = append(kr.Runs, r)
		c.logf("kafka-redrive run %d/%d: raw %s (%d transactions), dlqctl plan %s, apply %s", i+1, c.Runs,
			r.Raw.Round(time.Millisecond), r.RawTxns, r.Plan.Round(time.Millisecond), r.Apply.Round(time.Millisecond))
	}
	if c.CPUProfile == "" && c.MemProfile == "" {
		return nil
	}
	return kc.profile(ctx, res)
}

// kafkaRedriveRun is kafka-redrive's fixed parts: the broker, the size of
// each DLT, the plan's flags and the folder the plans go in.
type kafkaRedriveRun struct {
	c      Config
	d      *dlqctl
	b      *kafkatest.Broker
	n      int
	now    time.Time
	work   string
	params []string
}

// raw times rawkafka.TxnLoop redriving dlt into r, with the broker's CPU
// during it.
func (kc kafkaRedriveRun) raw(ctx context.Context, dlt string, r *KafkaRedriveRun) error {
	boot := kc.b.Bootstrap()
	// The raw loop's state topic exists beforehand, as dlqctl's does
	// after its first chunk (made compacted, like dlqctl's).
	if err := createStateTopic(ctx, boot, dlt+".state"); err != nil {
		return err
	}
	b0, _ := procCPU(kc.b.PID())
	cpu0, t0 := cpuTime(), time.Now()
	rr, err := rawkafka.TxnLoop(ctx, boot, dlt, dlt+".state", kafkaRedriveChunk)
	r.Raw, r.RawCPU, r.RawRead, r.RawTxns = time.Since(t0), cpuTime()-cpu0, rr.Read, rr.Transactions
	b1, _ := procCPU(kc.b.PID())
	r.BrokerRaw = b1 - b0
	if err != nil {
		return fmt.Errorf("raw transactional loop: %v", err)
	}
	if rr.Records != kc.n {
		return fmt.Errorf("raw transactional loop redrove %d records, want %d", rr.Records, kc.n)
	}
	return nil
}

// dlqctl plans and approves a redrive of dlt in the folder run, times its
// apply into r (with the broker's CPU during it) and checks that it moved
// every record and left the DLT empty. The first run's command lines go
// into kr.
func (kc kafkaRedriveRun) dlqctl(ctx context.Context, dlt, run string, kr *KafkaRedrive, r *KafkaRedriveRun) error {
	d := kc.d
	source := "kafka://" + kc.b.Bootstrap() + "?topic=" + dlt
	plan, lp, err := d.planApprove(ctx, source, filepath.Join(kc.work, run), kc.params...)
	if err != nil {
		return err
	}
	r.Plan = lp.Wall
	if kr.Apply == "" {
		repl := []string{source, "'kafka://127.0.0.1:PORT?topic=…'", plan, "p.json"}
		kr.Plan = d.commandLine(d.planArgs(source, plan, kc.params...), repl...)
		kr.Apply = "DLQCTL_APPROVAL_KEY=… " + d.commandLine(d.applyArgs(source, plan), repl...)
	}
	b0, _ := procCPU(kc.b.PID())
	la, err := d.launchArgs(ctx, approvalEnv, d.applyArgs(source, plan)...)
	b1, _ := procCPU(kc.b.PID())
	if err != nil {
		return err
	}
	r.Apply, r.ApplyCPU, r.ApplyRSS, r.BrokerApp = la.Wall, la.User+la.Sys, la.MaxRSS, b1-b0
	doc, err := parseRun(la.Stdout, kc.n)
	if err != nil {
		return err
	}
	r.Batches = len(doc.Batches)
	if r.Journal, _, err = journalSize(redrive.DefaultJournalPath(plan)); err != nil {
		return err
	}
	return checkDrained(ctx, d, source)
}

// profile runs one more apply in this process, on a DLT of its own, with
// the CPU and/or allocation profile on.
func (kc kafkaRedriveRun) profile(ctx context.Context, res *Results) error {
	d := kc.d
	cpu, mem, paths := kc.c.profilePaths("kafka-redrive")
	res.Profiles = append(res.Profiles, paths...)
	kc.c.logf("kafka-redrive: profiling dlqctl redrive apply in-process")
	dlt := "profile-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ".DLT"
	if err := produceKafka(ctx, kc.b.Bootstrap(), dlt, kc.n, kc.now); err != nil {
		return fmt.Errorf("produce: %v", err)
	}
	source := "kafka://" + kc.b.Bootstrap() + "?topic=" + dlt
	plan, _, err := d.planApprove(ctx, source, filepath.Join(kc.work, "profile"), kc.params...)
	if err != nil {
		return err
	}
	_, out, err := d.execInProcess(ctx, map[string]string{"DLQCTL_APPROVAL_KEY": approvalKey}, d.applyArgs(source, plan), cpu, mem)
	if err != nil {
		return err
	}
	_, err = parseRun(out, kc.n)
	return err
}

// checkDrained: after the apply, dlqctl sees nothing left in the DLT.
func checkDrained(ctx context.Context, d *dlqctl, source string) error {
	p, err := d.runProcess(ctx, source)
	if err != nil {
		return err
	}
	if p.Total != 0 {
		return fmt.Errorf("after the apply, stats still counts %d entries", p.Total)
	}
	return nil
}

func createKafkaTopics(ctx context.Context, bootstrap string, partitions int32, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	return err
}

func createStateTopic(ctx context.Context, bootstrap, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	compact := "compact"
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}

func (kr *KafkaRedrive) write(w io.Writer) {
	fmt.Fprintf(w, "\n### kafka-redrive — N = %s records, transactions of %d\n\n", group(float64(kr.N)), kafkaRedriveChunk)
	fmt.Fprintln(w, "| run | raw s | raw records/s | raw CPU s | dlqctl plan s | dlqctl apply s | apply records/s | ratio | apply CPU s | apply peak RSS MiB | journal MiB |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	var ratios []float64
	for i, r := range kr.Runs {
		ratios = append(ratios, r.ratio())
		fmt.Fprintf(w, "| %d | %.2f | %s | %.2f | %.2f | %.2f | %s | %.2f× | %.2f | %.1f | %.1f |\n", i+1,
			r.Raw.Seconds(), group(float64(kr.N)/r.Raw.Seconds()), r.RawCPU.Seconds(), r.Plan.Seconds(), r.Apply.Seconds(),
			group(float64(kr.N)/r.Apply.Seconds()), r.ratio(), r.ApplyCPU.Seconds(), float64(r.ApplyRSS)/1024, float64(r.Journal)/(1<<20))
	}
	if len(ratios) > 0 {
		verdict := "met"
		if median(ratios) < targetKafkaRedriveRatio {
			verdict = "**NOT met**"
		}
		fmt.Fprintf(w, "\nRatio apply/raw (records/s), median of the %d runs: **%.2f×**. Target ≥ %.1f×: %s.\n", len(ratios), median(ratios), targetKafkaRedriveRatio, verdict)
	}
	fmt.Fprintf(w, "Broker: Apache Kafka 4.4.0, one KRaft node (started in %.1fs); each side redrives a DLT of its own (4 partitions, Spring Kafka headers) to 5 origin topics of %d partitions.\n", kr.BrokerStart.Seconds(), kafkaOriginPartitions)
	fmt.Fprintf(w, "dlqctl: `%s` then `%s` (timed: the apply process, journal on).\n", kr.Plan, kr.Apply)
	fmt.Fprintln(w, "Raw: bench/rawkafka.TxnLoop — reads the DLT read_committed and per 256 records, in one transaction, produces each to its original topic and partition (headers less kafka_dlt-*, plus a run marker) and one JSON state record per entry to a compacted state topic, all in one batch, then commits.")
	if len(kr.Runs) > 0 {
		var br, ba []float64
		for _, r := range kr.Runs {
			br, ba = append(br, r.BrokerRaw.Seconds()), append(ba, r.BrokerApp.Seconds())
		}
		fmt.Fprintf(w, "Broker CPU (the JVM's user+sys), median: %.2f s during the raw loop, %.2f s during the apply.\n", median(br), median(ba))
	}
}
