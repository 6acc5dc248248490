package sqsdlq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// TestLeaseOtherPIDNamespace: a run in another PID namespace under the
// same host name (a pod with hostNetwork beside the holder's, a container
// started with --uts=host) cannot see the holder's PID. It is refused
// (exit 7, naming the holder) and moves nothing, rather than taking the
// lease of a holder that lives because its PID looks dead from there.
func TestLeaseOtherPIDNamespace(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	fillDLQ(t, p, 3)
	dir := t.TempDir()
	src := p.sourceURL("lease_settle=200ms")
	if code, out := dlqctlRun(t, dir, nil, "--source", src, "redrive", "plan", "--reason", "pid namespaces", "--allow-disposition", "investigate",
		"--rate", "0", "--settle", "0s", "--unverified-ok", "--out", "p.json"); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctlRun(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	q := open(t, ctx, p, "lease_settle=200ms")
	holder := backend.ThisProcess("run-holder", time.Now())
	l, err := q.Lease(ctx, holder)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	code, out := dlqctlRunWith(t, dir, nil, testproc.InOtherPIDNamespace, "--source", src, "redrive", "apply", "p.json")
	if code != 7 || !strings.Contains(out, "run run-holder (pid ") || !strings.Contains(out, " on "+holder.Host+",") {
		t.Fatalf("apply in another PID namespace while run-holder lives: exit %d\n%s\nwant exit 7 naming run-holder", code, out)
	}
	if h, err := q.LeaseHolder(ctx); err != nil || !strings.Contains(h, "run-holder") {
		t.Fatalf("after the refusal the lease is %q, %v; want run-holder's still", h, err)
	}
	if n := count(t, ctx, p.dlq); n != 3 {
		t.Fatalf("the DLQ holds %d after the refused run, want 3", n)
	}
}
