package conformance

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// caseRandomKills: `redrive apply`, then `redrive resume`, is killed with
// SIGKILL at random moments, and the broker once under a run, until a run
// completes; then the consumer takes the origin. Nothing is lost, and
// nothing reaches the consumer twice outside the resends the journal
// records as of unknown outcome (ambiguous). The seed is logged: a failure
// replays with DLQCTL_CONFORMANCE_SEED.
//
// Each kill is a crash at a moment no crash hook names: between a publish
// and its journal record, inside a chunk, while a lease is taken or given
// back. The broker's kill is the one the run must ride out: it ends on its
// own within a bound, and the resume completes.
func caseRandomKills(t *testing.T, srv *Target) {
	fx := srv.Fresh(t)
	fx.Source += srv.Outage
	const n = 60
	fps := seed(t, fx, n, "timeout", 1)
	dir := t.TempDir()
	// 60 entries at 8/s: seven seconds of moves. A kill comes within 1.5 s
	// of a run's first journal write, so two kills leave at least three
	// seconds of moves for the run under which the broker is killed.
	planAndApprove(t, dir, fx, "redrive", "--rate", "8", "--burst", "1", "--ramp", "5,10", "--settle", "0s", "--unverified-ok")
	entries := planEntries(t, filepath.Join(dir, "p.json"))
	rng := rand.New(rand.NewPCG(killSeed(t), 29))
	journal := filepath.Join(dir, "p.journal")
	const dlqctlKills = 6
	kills, brokerKilled, done := 0, srv.Kill == nil, false
	for attempt := 0; attempt < 30 && !done; attempt++ {
		cmd := []string{"apply", "p.json"}
		if _, err := os.Stat(journal); err == nil {
			cmd = []string{"resume", "p.journal"}
		}
		run := startRun(t, dir, nil, append([]string{"--source", fx.Source, "-o", "json", "redrive"}, cmd...)...)
		// The kill comes at a random moment after the run wrote to its
		// journal (on a slow start it would otherwise land before the run
		// did anything, each time).
		after := time.Duration(rng.IntN(1500)) * time.Millisecond
		if kills >= dlqctlKills && brokerKilled {
			after = 3 * time.Minute
		} else {
			run.journalGrows(journal, 60*time.Second)
		}
		code, out, ended := run.wait(after)
		if !ended && !brokerKilled && kills >= 2 {
			brokerKilled = true
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			code, out, ended = run.wait(90 * time.Second)
			if !ended {
				t.Errorf("attempt %d (%s): the run did not end within 90 s of the broker's crash (a hang)\n%s", attempt, cmd[0], tail(out))
				run.kill()
			}
			if err := srv.Up(); err != nil {
				t.Fatal(err)
			}
			t.Logf("attempt %d (%s): the broker killed under it, exit %d", attempt, cmd[0], code)
			continue
		}
		if !ended {
			run.kill()
			kills++
			t.Logf("attempt %d (%s): killed after %s", attempt, cmd[0], after)
			continue
		}
		t.Logf("attempt %d (%s): exit %d", attempt, cmd[0], code)
		switch code {
		case 0:
			d := parseRun(t, out)
			if d.Status != "completed" || d.HaltedBy != "" {
				t.Fatalf("attempt %d (%s): %s, halted by %q; want completed\n%s", attempt, cmd[0], d.Status, d.HaltedBy, tail(out))
			}
			done = true
		case 1, 7:
			// A connection the restarted broker does not take yet, or a
			// lease a killed run holds until it expires where its holder
			// cannot be proved gone: the next attempt resumes.
			time.Sleep(time.Second)
		default:
			t.Fatalf("attempt %d (%s): exit %d\n%s", attempt, cmd[0], code, tail(out))
		}
	}
	if !done {
		t.Fatalf("no run completed after %d kills of dlqctl (broker killed: %v)", kills, brokerKilled)
	}
	t.Logf("%d kills of dlqctl, the broker killed once: %v", kills, srv.Kill != nil)
	checkNothingLostOrTwice(t, fx, fps, entries, dir)
}

// killSeed is the seed of the kill moments: DLQCTL_CONFORMANCE_SEED when
// set (to replay a failure), else the clock's; it is logged either way.
func killSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DLQCTL_CONFORMANCE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DLQCTL_CONFORMANCE_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (DLQCTL_CONFORMANCE_SEED replays it)", seed)
	return seed
}

// checkNothingLostOrTwice checks, after a completed run of the plan in
// dir: the DLQ is empty, and the consumer took every entry once, or more
// than once only where the journal records a resend of unknown outcome.
func checkNothingLostOrTwice(t *testing.T, fx Fixture, fps map[string]string, entries []planEntry, dir string) {
	t.Helper()
	steps := journalSteps(t, filepath.Join(dir, "p.journal"))
	if s := stats(t, fx); s.Total != 0 {
		t.Errorf("stats counts %d entries after the completed run, want 0; the journal's steps of each entry:\n%s", s.Total, stepsOf(entries, steps))
	}
	ambiguous := eventsWith(entries, steps, "ambiguous")
	if len(ambiguous) > 0 {
		t.Logf("resends of unknown outcome: %s", strings.Join(sortedKeys(ambiguous), " "))
	}
	rows := consumeAllOf(t, []Fixture{fx}, []string{filepath.Join(dir, "inbox.db")})
	checkOnceOutsideAmbiguous(t, fx, fps, rows[0], ambiguous)
}

// stepsOf lists, one line per plan entry, the journal's steps of it: what
// a failure needs to say which step left an entry behind.
func stepsOf(entries []planEntry, steps map[int][]string) string {
	var b strings.Builder
	for i, e := range entries {
		fmt.Fprintf(&b, "  %d %s %s: %s\n", i+1, e.ID, e.EventID, strings.Join(steps[i+1], " "))
	}
	return b.String()
}

// journalGrows waits, up to bound, until the journal at path is longer
// than when it is called, or the run ends.
func (r *bgRun) journalGrows(path string, bound time.Duration) {
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	from := size()
	for deadline := time.Now().Add(bound); time.Now().Before(deadline) && size() == from; {
		select {
		case <-r.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
