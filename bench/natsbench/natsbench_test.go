// Package natsbench measures the NATS JetStream backend against the raw
// nats.go loop doing the same work, in the same run, on a real
// nats-server (backends/nats/natstest):
//
//   - stats: `dlqctl stats` over N dead-letter copies against an ordered
//     consumer that reads every copy and its headers;
//   - redrive: an unthrottled `dlqctl redrive` of M copies against a loop
//     that publishes each copy to its subject, waits for the ack and
//     deletes it from the DLQ stream by sequence.
//
// It runs only when asked (it seeds 100,000 messages):
//
//	DLQCTL_BENCH_NATS=1 go test ./bench/natsbench -run TestNATSRatios -v [-count=1]
//
// DLQCTL_BENCH_NATS_N and DLQCTL_BENCH_NATS_REDRIVE_N change the sizes
// (100,000 and 10,000).
package natsbench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/cmd"
)

func size(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// seed publishes n copies to dlq (asynchronously, then waits for every
// ack), each bound for subj.
func seed(t *testing.T, js jetstream.JetStream, dlq, subj string, n int) {
	t.Helper()
	errs := []string{"timeout calling payments", "schema: missing field amount", "permission denied", "order not found"}
	for i := range n {
		h := nats.Header{}
		h.Set("event_id", fmt.Sprintf("E%07d", i))
		h.Set(natsdlq.HeaderOriginalSubject, subj)
		h.Set("last_error", errs[i%len(errs)])
		h.Set("attempts", "3")
		h.Set("key", fmt.Sprintf("k%d", i%1000))
		h.Set("tenant", "acme")
		h.Set(nats.MsgIdHdr, fmt.Sprintf("dead-%d", i))
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: "dlq." + dlq + ".x", Header: h, Data: []byte(fmt.Sprintf(`{"order":%d,"amount":1200}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		t.Fatal("seed: acks did not arrive")
	}
}

func dlqctl(t *testing.T, args ...string) {
	t.Helper()
	io, _, out, errOut := cmd.TestIO()
	f := &cmd.Factory{IO: io, Now: time.Now, Getenv: func(string) string { return "" }}
	if code := cmd.Execute(context.Background(), f, args); code != 0 {
		t.Fatalf("dlqctl %v: exit %d\n%s%s", args, code, out, errOut)
	}
	if os.Getenv("DLQCTL_BENCH_NATS_VERBOSE") != "" {
		t.Logf("%s%s", out, errOut)
	}
}

func TestNATSRatios(t *testing.T) {
	if os.Getenv("DLQCTL_BENCH_NATS") == "" {
		t.Skip("set DLQCTL_BENCH_NATS=1 to run the NATS benchmark")
	}
	t.Chdir(t.TempDir())
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	newStreams := func(tag string) (dlq, subj string) {
		dlq = "BENCH_" + tag + "_DLQ"
		subj = "bench." + tag
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_" + tag, Subjects: []string{subj}}); err != nil {
			t.Fatal(err)
		}
		return dlq, subj
	}

	// stats
	n := size("DLQCTL_BENCH_NATS_N", 100_000)
	dlq, subj := newStreams("stats")
	st := time.Now()
	seed(t, js, dlq, subj, n)
	t.Logf("seeded %d copies in %s", n, time.Since(st).Round(time.Millisecond))
	rawStats := func() time.Duration {
		start := time.Now()
		oc, err := js.OrderedConsumer(ctx, dlq, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		it, err := oc.Messages(jetstream.PullMaxMessages(1000))
		if err != nil {
			t.Fatal(err)
		}
		seen, hdrBytes := 0, 0
		for seen < n {
			m, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			hdrBytes += len(m.Headers().Get("last_error")) + len(m.Headers().Get("event_id"))
			seen++
		}
		it.Stop()
		return time.Since(start)
	}
	source := srv.URL() + "?stream=" + dlq
	dlqStats := func() time.Duration {
		start := time.Now()
		dlqctl(t, "--source", source, "stats", "-o", "json")
		return time.Since(start)
	}
	rawStats() // warm-up: the server's caches, both sides' connections
	dlqStats()
	for run := 1; run <= 3; run++ {
		r, d := rawStats(), dlqStats()
		t.Logf("stats %d copies, run %d: raw %s (%.0f/s), dlqctl %s (%.0f/s), ratio %.2f",
			n, run, r.Round(time.Millisecond), float64(n)/r.Seconds(), d.Round(time.Millisecond), float64(n)/d.Seconds(), r.Seconds()/d.Seconds())
	}

	// redrive
	m := size("DLQCTL_BENCH_NATS_REDRIVE_N", 10_000)
	rawDLQ, rawSubj := newStreams("rawredrive")
	seed(t, js, rawDLQ, rawSubj, m)
	rawStream, _ := js.Stream(ctx, rawDLQ)
	start := time.Now()
	oc, err := js.OrderedConsumer(ctx, rawDLQ, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := oc.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < m; i++ {
		msg, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		md, _ := msg.Metadata()
		out := &nats.Msg{Subject: msg.Headers().Get(natsdlq.HeaderOriginalSubject), Header: msg.Headers(), Data: msg.Data()}
		out.Header.Set(nats.MsgIdHdr, fmt.Sprintf("raw-%d", md.Sequence.Stream))
		if _, err := js.PublishMsg(ctx, out); err != nil {
			t.Fatal(err)
		}
		if err := rawStream.DeleteMsg(ctx, md.Sequence.Stream); err != nil {
			t.Fatal(err)
		}
	}
	it.Stop()
	raw := time.Since(start)
	dDLQ, dSubj := newStreams("redrive")
	seed(t, js, dDLQ, dSubj, m)
	start = time.Now()
	dlqctl(t, "--source", srv.URL()+"?stream="+dDLQ, "redrive", "--yes", "--reason", "bench", "--rate", "0",
		"--ramp", "1000", "--settle", "0s", "--allow-disposition", "investigate,fix-then-redrive,resolve", "--unverified-ok")
	d := time.Since(start)
	if in, err := js.Stream(ctx, dDLQ); err != nil {
		t.Fatal(err)
	} else if info, err := in.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("%d copies left after the redrive (%v)", info.State.Msgs, err)
	}
	t.Logf("redrive %d copies: raw publish+ack+delete %s (%.0f/s), dlqctl redrive (plan, journal, apply) %s (%.0f/s), ratio %.2f",
		m, raw.Round(time.Millisecond), float64(m)/raw.Seconds(), d.Round(time.Millisecond), float64(m)/d.Seconds(), raw.Seconds()/d.Seconds())
}
