package rabbitmq_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/conformance"
)

// TestRandomKills kills `redrive apply` and its resumes with SIGKILL at
// random moments, and the broker once (SIGKILL, then a restart) under a
// run, until a run completes. Nothing is lost (stats counts nothing left,
// every event is on the origin) and nothing is moved twice (each event
// once on the origin, more only where the journal records a resend of
// unknown outcome: ambiguous).
func TestRandomKills(t *testing.T) {
	srv := rabbitmqtest.Start(t) // its own: it is killed
	base := uniq(t)
	ctx := context.Background()
	if err := rabbitmqtest.DeclareDLX(ctx, srv.Channel(t), base+"-orders", base+"-dlq", false, 0); err != nil {
		t.Fatal(err)
	}
	const n = 60
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("K%02d", i))
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", ids...)
	time.Sleep(time.Second) // the dead letters on disk: a crash must lose acks, not them
	dir := t.TempDir()
	src := []string{"--source", srv.Source(base+"-dlq") + "&timeout=2s"}
	if code, out := conformance.RunCommand(t, dir, nil, nil, append(src, "redrive", "plan", "--reason", "random kills", "--allow-disposition", "investigate",
		"--rate", "5", "--burst", "1", "--ramp", "5,10", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d\n%s", code, out)
	}
	if code, out := conformance.RunCommand(t, dir, nil, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d\n%s", code, out)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	journal := filepath.Join(dir, "p.journal")
	kills, brokerKilled, done := 0, false, false
	for attempt := 0; attempt < 40 && !done; attempt++ {
		args := append(append([]string{}, src...), "redrive", "apply", "p.json")
		if _, err := os.Stat(journal); err == nil {
			args = append(append([]string{}, src...), "redrive", "resume", "p.journal")
		}
		c := conformance.Command(dir, nil, args...)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { c.Wait(); close(exited) }()
		// Killed at a random moment of its first 2.5 s (a run of 60 at 5/s
		// takes 12 s); after eight kills, the runs go on to the end.
		killAfter := time.Duration(rng.IntN(2500)) * time.Millisecond
		if kills >= 8 {
			killAfter = 3 * time.Minute
		}
		select {
		case <-exited:
		case <-time.After(killAfter):
			if !brokerKilled && kills == 2 {
				brokerKilled = true
				if err := srv.Kill(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-exited:
				case <-time.After(90 * time.Second):
					c.Process.Kill()
					<-exited
					t.Fatalf("attempt %d: the run did not end within 90 s of the broker's crash (a hang)\n%s", attempt, out.String())
				}
				if err := srv.Up(); err != nil {
					t.Fatal(err)
				}
				t.Logf("attempt %d (%s): the broker killed under it: exit %d", attempt, args[len(args)-2], c.ProcessState.ExitCode())
				continue
			}
			c.Process.Signal(syscall.SIGKILL)
			<-exited
			kills++
			t.Logf("attempt %d (%s): killed after %s", attempt, args[len(args)-2], killAfter)
			continue
		}
		code := c.ProcessState.ExitCode()
		t.Logf("attempt %d (%s): exit %d: %s", attempt, args[len(args)-2], code, lastLine(out.String()))
		if code == 0 {
			done = true
		} else {
			// The lease of a killed run, or a broker still recovering:
			// the next attempt resumes.
			time.Sleep(time.Second)
		}
	}
	if !done {
		t.Fatalf("no run completed after %d kills", kills)
	}
	t.Logf("%d kills of dlqctl, the broker killed once: %v", kills, brokerKilled)
	if !brokerKilled {
		t.Error("the runs ended before the broker was killed: nothing was asked of a broker crash")
	}
	if doc := stats(t, dir, srv.Source(base+"-dlq")); doc.Total != 0 {
		t.Errorf("stats counts %d entries left after the completed run, want 0", doc.Total)
	}
	ambiguous := conformance.JournaledAs(t, filepath.Join(dir, "p.json"), filepath.Join(dir, "p.journal"), "ambiguous")
	got := drainCounts(t, srv, base+"-orders")
	for _, id := range ids {
		switch c := got[id]; {
		case c == 0:
			t.Errorf("%s never reached the origin: lost", id)
		case c > 1 && !ambiguous[id]:
			t.Errorf("%s is on the origin %d times, and the journal records no resend of unknown outcome", id, c)
		}
	}
	t.Logf("%d events resent with an unknown outcome (journaled ambiguous)", len(ambiguous))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
