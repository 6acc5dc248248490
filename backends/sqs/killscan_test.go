package sqsdlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
	"github.com/dlqctl/dlqctl/envelope"
)

// fillDLQ sends n small messages straight to the DLQ, 10 per call, with
// origin_stream naming the pair's source queue.
func fillDLQ(t *testing.T, p pair, n int) {
	t.Helper()
	server := sqsServer(t)
	ctx := testCtx(t)
	c := server.Client()
	for i := 0; i < n; i += 10 {
		var es []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			es = append(es, types.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(fmt.Sprintf(`{"n":%d}`, j)),
				MessageAttributes: map[string]types.MessageAttributeValue{
					"event_id":      {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprintf("K%05d", j))},
					"origin_stream": {DataType: aws.String("String"), StringValue: aws.String(p.srcName)},
				},
			})
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.dlq), Entries: es})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("fill: %v %+v", err, out)
		}
	}
}

// killScanHoldingDLQ starts a scan of p's DLQ of n messages that holds
// every message (list writes more than a pipe holds and nobody reads it),
// waits until all n are in flight, kills it with -9 and returns when.
func killScanHoldingDLQ(t *testing.T, ctx context.Context, p pair, n int) time.Time {
	t.Helper()
	c := exec.Command("dlqctl", "--source", p.sourceURL(), "list", "-o", "ndjson")
	c.Env = append(os.Environ(), sqstest.Env()...)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		if v, f := counts(t, ctx, p.dlq); v == 0 && f == n {
			break
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal("the scan never held the whole DLQ")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Let it hold them a moment longer, then kill it.
	time.Sleep(500 * time.Millisecond)
	c.Process.Kill()
	c.Wait()
	return time.Now()
}

// TestKilledScan: a scan killed with -9 while it holds the whole DLQ
// invisible: check counts the messages it cannot see (and fails
// --max-total 0), stats reports them as not seen, a plan says it cannot
// hold them, an apply of an earlier plan names them, and they are visible
// again within the scan's short visibility timeout, not one sized for the
// whole DLQ.
//
// Each command runs on a DLQ of its own, right after its own killed scan:
// the messages are hidden for 30 s after the kill, and the four commands
// in a row took longer than that on a loaded machine.
func TestKilledScan(t *testing.T) {
	ctx := testCtx(t)
	const n = 1500
	held := func() (pair, string, time.Time) {
		p := newPair(t, ctx, false, 2)
		fillDLQ(t, p, n)
		return p, t.TempDir(), killScanHoldingDLQ(t, ctx, p, n)
	}

	p, dir, killed := held()
	code, got := dlqctlRun(t, dir, nil, "--source", p.sourceURL(), "check", "--max-total", "0", "-o", "json")
	if code != 4 {
		t.Fatalf("check --max-total 0 after a killed scan: exit %d, want 4 (the in-flight messages are in the DLQ)\n%s", code, got)
	}
	var doc struct {
		Total   int64 `json:"total"`
		NotSeen int64 `json:"not_seen"`
	}
	if err := json.NewDecoder(strings.NewReader(got)).Decode(&doc); err != nil || doc.NotSeen == 0 || doc.Total+doc.NotSeen != n {
		t.Fatalf("check: total %d + not_seen %d (%v), want %d in all\n%s", doc.Total, doc.NotSeen, err, n, got)
	}
	t.Logf("check: total %d, not seen %d, %s after the kill", doc.Total, doc.NotSeen, time.Since(killed).Round(100*time.Millisecond))

	p, dir, _ = held()
	code, got = dlqctlRun(t, dir, nil, "--source", p.sourceURL(), "stats", "-o", "json")
	if code != 0 || !strings.Contains(got, "in flight and not seen") {
		t.Fatalf("stats after a killed scan: exit %d\n%s", code, got)
	}

	// A plan made now cannot hold the messages it could not see: it says so.
	p, dir, _ = held()
	code, got = dlqctlRun(t, dir, nil, "--source", p.sourceURL(), "redrive", "plan", "--reason", "after a killed scan", "--allow-disposition", "investigate",
		"--rate", "100000", "--settle", "0s", "--unverified-ok", "--out", "p2.json")
	if code != 0 || !strings.Contains(got, "not seen by the scan, so this plan cannot hold them") {
		t.Fatalf("plan after a killed scan: exit %d, want a warning about the messages it did not see\n%s", code, got)
	}

	// An apply of a plan made before the kill finds planned messages
	// missing: it says they may be among the messages in flight.
	p = newPair(t, ctx, false, 2)
	fillDLQ(t, p, n)
	dir = t.TempDir()
	if code, out := dlqctlRun(t, dir, nil, "--source", p.sourceURL(), "redrive", "plan", "--reason", "killed scan", "--allow-disposition", "investigate",
		"--rate", "100000", "--settle", "0s", "--unverified-ok", "--out", "p.json"); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctlRun(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	killed = killScanHoldingDLQ(t, ctx, p, n)
	code, got = dlqctlRun(t, dir, nil, "--source", p.sourceURL(), "redrive", "apply", "p.json")
	if code != 5 || !strings.Contains(got, "in flight and not seen") {
		t.Fatalf("apply after a killed scan: exit %d, want 5 naming the in-flight messages\n%s", code, got)
	}
	for {
		v, _ := counts(t, ctx, p.dlq)
		if v == n {
			break
		}
		if time.Since(killed) > 45*time.Second {
			t.Fatalf("%d of %d visible %s after the kill; a killed scan must hide them for its short visibility timeout only", v, n, time.Since(killed).Round(time.Second))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("visible again %s after the kill", time.Since(killed).Round(time.Second))
}

// TestLiveScanExtendsVisibility: a scan that outlives its visibility
// timeout (its caller is slow) extends it: no other reader receives a
// message mid-scan, and all are visible again when it ends.
func TestLiveScanExtendsVisibility(t *testing.T) {
	server := sqsServer(t)
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 40
	fillDLQ(t, p, n)
	q := open(t, ctx, p)
	q.SetScanVisibility(3 * time.Second)
	other := server.Client()
	stolen := 0
	first := true
	err := q.Scan(ctx, "", func(envelope.Envelope) error {
		if !first {
			return nil
		}
		first = false
		// Hold the scan for more than twice its visibility timeout while
		// another reader tries to receive.
		for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
			out, err := other.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(p.dlq), MaxNumberOfMessages: 10, VisibilityTimeout: 0})
			if err != nil {
				return err
			}
			stolen += len(out.Messages)
			time.Sleep(100 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stolen > 0 {
		t.Fatalf("another reader received %d messages while the scan lived", stolen)
	}
	if v, f := counts(t, ctx, p.dlq); v != n || f != 0 {
		t.Fatalf("after the scan %d visible, %d in flight; want %d, 0", v, f, n)
	}
}
