package cmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/redrive"
)

// clock advances one second per reading, so rates and ETAs are exact.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func viewFor(kind string, errOut *bytes.Buffer) (*runView, *bytes.Buffer) {
	io, _, out, _ := TestIO()
	io.ErrOut, io.ErrTTY = errOut, true
	c := &clock{t: testNow}
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: c.now, Getenv: func(string) string { return "" }}}
	f.format = "table"
	v := newRunView(f.IO, f.format, f.reportOptions, f.Now)
	v.kind = kind
	return v, out
}

// lastBar is the last progress line drawn (after the last carriage return).
func lastBar(s string) string {
	s = strings.TrimSuffix(s, "\x1b[K")
	return s[strings.LastIndex(s, "\r")+1:]
}

func TestProgressBarResumesAtItsPlace(t *testing.T) {
	var errOut bytes.Buffer
	v, _ := viewFor(redrive.KindRedrive, &errOut)
	plan := &redrive.Plan{Kind: redrive.KindRedrive, Entries: redrive.NewEntries(make([]redrive.Entry, 30)...)}
	st := redrive.Replay(nil, []redrive.Record{
		{Type: redrive.RecRunStart, RunID: "r", Plan: plan},
		{Type: redrive.RecBatchEnd, Batch: &redrive.BatchReport{Index: 1, Size: 10}},
	})
	v.begin(st)
	v.Progress(15, 30) // the redrive engine counts from the start of the run
	got := lastBar(errOut.String())
	if !strings.HasPrefix(got, "batch 2 [############............] 15/30") {
		t.Errorf("bar after resume = %q, want batch 2 at 15/30", got)
	}
	// 5 moved by this process in 1 s: 5/s, 15 left: 3s.
	if !strings.Contains(got, " 5.0/s ETA 3s") {
		t.Errorf("bar = %q, want rate 5.0/s and ETA 3s", got)
	}
}

func TestResolveBarDoesNotRestartEachBatch(t *testing.T) {
	var errOut bytes.Buffer
	v, out := viewFor(redrive.KindResolve, &errOut)
	v.begin(redrive.Replay(nil, []redrive.Record{{Type: redrive.RecRunStart, RunID: "r", Plan: &redrive.Plan{Kind: redrive.KindResolve}}}))
	v.Progress(10, 30)
	v.BatchDone(redrive.BatchReport{Index: 1, Size: 10, Gate: redrive.GatePass})
	v.Progress(5, 30) // the resolve engine counts from the start of each batch
	if got := lastBar(errOut.String()); !strings.HasPrefix(got, "batch 2 [############............] 15/30") {
		t.Errorf("bar in batch 2 = %q, want 15/30 (10 done, 5 of the second batch)", got)
	}
	v.BatchDone(redrive.BatchReport{Index: 2, Size: 20, Gate: redrive.GatePass})
	if n := strings.Count(out.String(), "BATCH\tSIZE"); n != 1 {
		t.Errorf("%d batch table headers, want one table with rows appended:\n%s", n, out)
	}
	if !strings.Contains(out.String(), "\n1\t10\t") || !strings.Contains(out.String(), "\n2\t20\t") {
		t.Errorf("rows missing:\n%s", out)
	}
}

func TestGateNamesEventsAndCause(t *testing.T) {
	b := redrive.BatchReport{Index: 3, Gate: redrive.GatePending, GateReason: "12 events still without an effect when --settle ran out"}
	for i := 0; i < 12; i++ {
		b.Events = append(b.Events, redrive.EventVerdict{EventID: "evt-" + string(rune('a'+i)), Verdict: redrive.VerdictPending})
	}
	b.Events = append(b.Events, redrive.EventVerdict{EventID: "evt-ok", Verdict: redrive.VerdictApplied})
	msg := gateExplanation(b)
	for _, want := range []string{"batch 3 stopped by the pending gate", "evt-a, evt-b", "evt-j and 2 more", "is the consumer running"} {
		if !strings.Contains(msg, want) {
			t.Errorf("gate message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "evt-ok") || strings.Contains(msg, "evt-k") {
		t.Errorf("gate message names events beyond the first 10 pending: %s", msg)
	}
}

// fakeProbe stands in for the consumer's effects store: E1 has its effect,
// E2 not yet.
type fakeProbe struct{}

func (fakeProbe) Records(context.Context, []string) (map[string]effects.Record, error) {
	return map[string]effects.Record{"E1": {Attempts: 1, Effects: 1}}, nil
}
func (fakeProbe) String() string { return "fake" }
func (fakeProbe) Close() error   { return nil }

func TestSettleCountsDownWithEffectsSeen(t *testing.T) {
	var errOut bytes.Buffer
	v, _ := viewFor(redrive.KindRedrive, &errOut)
	v.begin(redrive.Replay(nil, []redrive.Record{{Type: redrive.RecRunStart, RunID: "r", Plan: &redrive.Plan{Kind: redrive.KindRedrive}}}))
	slept := 0
	eng := &redrive.Engine{Probe: fakeProbe{}, Sleep: func(context.Context, time.Duration) error { slept++; return nil }}
	v.watch(eng, 30*time.Second)
	if _, err := eng.Probe.Records(context.Background(), []string{"E1", "E2"}); err != nil {
		t.Fatal(err)
	}
	eng.Sleep(context.Background(), time.Second)
	eng.Sleep(context.Background(), time.Second)
	got := lastBar(errOut.String())
	// The clock advances a second per reading: two readings since the start.
	if got != "batch 1 settling: 28s left, effects seen 1/2" || slept != 2 {
		t.Errorf("settle line = %q (slept %d), want the countdown with 1/2 effects seen", got, slept)
	}
}
