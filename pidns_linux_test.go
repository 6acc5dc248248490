package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// TestLeaseOtherPIDNamespace: while this process holds a DLQ's lease, an
// apply started in another PID namespace under the same host name (a pod
// with hostNetwork beside the holder's, a container started with
// --uts=host), from where the holder's PID is not visible, is refused
// (exit 7, naming the holder) and moves nothing: on dir (an flock, which
// the kernel holds whatever the namespace) and on Redis (a key whose
// holder's PID is checked only in its own PID space). SQS has the same
// test in its package.
func TestLeaseOtherPIDNamespace(t *testing.T) {
	redisSrc, _, _ := incidentOnRedis(t, 12)
	queue := filepath.Join(t.TempDir(), "queue")
	if err := os.CopyFS(queue, os.DirFS("testdata/incident")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, src string }{{"dir", "dir:" + queue}, {"redis", redisSrc}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			if code, out := dlqctlProc(t, dir, nil, "--source", c.src, "redrive", "plan", "--category", "transient", "--reason", "pid namespaces",
				"--rate", "0", "--settle", "0s", "--unverified-ok", "--out", "p.json"); code != 0 {
				t.Fatalf("plan: %d %s", code, out)
			}
			if code, out := dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
				t.Fatalf("approve: %d %s", code, out)
			}
			src, err := all.Registry().Open(ctx, c.src, backend.OpenOptions{Getenv: os.Getenv})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			before, err := src.Len(ctx)
			if err != nil {
				t.Fatal(err)
			}
			holder := backend.ThisProcess("run-holder", time.Now())
			l, err := src.(backend.Leaser).Lease(ctx, holder)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			cmd := exec.Command("dlqctl", "--source", c.src, "redrive", "apply", "p.json")
			testproc.InOtherPIDNamespace(cmd)
			code, out := runProc(t, cmd, dir, nil)
			if code != 7 || !strings.Contains(out, "run run-holder (pid ") || !strings.Contains(out, " on "+holder.Host+",") {
				t.Fatalf("apply in another PID namespace while run-holder lives: exit %d\n%s\nwant exit 7 naming run-holder", code, out)
			}
			if after, err := src.Len(ctx); err != nil || after != before {
				t.Fatalf("the DLQ holds %d (%v) after the refused run, want %d", after, err, before)
			}
		})
	}
}
