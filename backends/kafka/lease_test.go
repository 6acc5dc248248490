package kafkadlq_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/envelope"
)

// deadPID is the PID of a process that has ended.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

func TestLease(t *testing.T) {
	ctx := ctxFor(t)
	_, _, src, _ := seedRedrive(t, ctx)
	host, _ := os.Hostname()
	a := backend.LeaseHolder{RunID: "run-a", PID: deadPID(t), Host: host, Since: time.Now()}
	la, err := src.Lease(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	other := openTopic(t, ctx, src.TopicName(), kafkadlq.Options{})
	_, err = other.Lease(ctx, backend.LeaseHolder{RunID: "run-b", PID: 12, Host: host})
	var busy *backend.BusyError
	if !errors.As(err, &busy) || !errors.Is(err, backend.ErrBusy) || !strings.Contains(busy.Holder, "run-a") {
		t.Fatalf("second run: %v", err)
	}
	if h, err := other.LeaseHolder(ctx); err != nil || !strings.Contains(h, fmt.Sprintf("run run-a (pid %d", a.PID)) {
		t.Fatalf("LeaseHolder %q %v", h, err)
	}
	// run-a's process is gone (kill -9): a resume with the same run ID
	// takes it over at once, and the old lease is lost.
	again, err := other.Lease(ctx, backend.LeaseHolder{RunID: "run-a", PID: os.Getpid(), Host: host})
	if err != nil {
		t.Fatalf("takeover by the same run: %v", err)
	}
	if _, err := src.Publish(ctx, nil, backend.Markers{RunID: "run-a"}); !errors.Is(err, backend.ErrBusy) {
		t.Fatalf("the taken-over Topic still moves: %v", err)
	}
	_ = la
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := other.Lease(ctx, backend.LeaseHolder{RunID: "run-b", PID: 12, Host: host})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	defer lb.Release(ctx)
	select {
	case <-lb.Lost():
		t.Fatal("lease lost at once")
	default:
	}
}

// TestResumeRefusedWhileHolderAlive: a resume does not take over its
// run's lease while the process holding it lives; it names the holder.
func TestResumeRefusedWhileHolderAlive(t *testing.T) {
	ctx := ctxFor(t)
	_, dlt, src, _ := seedRedrive(t, ctx)
	host, _ := os.Hostname()
	l, err := src.Lease(ctx, backend.LeaseHolder{RunID: "run-live", PID: os.Getpid(), Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	second := openTopic(t, ctx, dlt, kafkadlq.Options{})
	_, err = second.Lease(ctx, backend.LeaseHolder{RunID: "run-live", PID: deadPID(t), Host: host})
	var busy *backend.BusyError
	if !errors.As(err, &busy) || !strings.Contains(busy.Holder, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("resume over a live holder: %v", err)
	}
	select {
	case <-l.Lost():
		t.Fatal("the live holder lost its lease")
	case <-time.After(11 * time.Second): // past a renewal
	}
}

// TestLeaseExpiresByBrokerClock: an abandoned lease of another run stops
// blocking once its TTL has passed by the broker's clock, whatever the
// taker's clock says.
func TestLeaseExpiresByBrokerClock(t *testing.T) {
	ctx := ctxFor(t)
	dlt := freshTopic(t, ".DLT")
	createTopic(t, ctx, dlt, 1, nil)
	a := openTopic(t, ctx, dlt, kafkadlq.Options{LeaseTTL: 1500 * time.Millisecond})
	if _, err := a.Lease(ctx, backend.LeaseHolder{RunID: "run-a"}); err != nil {
		t.Fatal(err)
	}
	a.Close() // abandoned: no renewal, no release
	// A taker whose clock runs two hours ahead is still refused while the
	// lease lives by the broker's clock.
	ahead := openTopic(t, ctx, dlt, kafkadlq.Options{LeaseTTL: time.Hour, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if _, err := ahead.Lease(ctx, backend.LeaseHolder{RunID: "run-b"}); !errors.Is(err, backend.ErrBusy) {
		t.Fatalf("a fast clock took a live lease: %v", err)
	}
	time.Sleep(2 * time.Second)
	b := openTopic(t, ctx, dlt, kafkadlq.Options{LeaseTTL: time.Hour, Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	lb, err := b.Lease(ctx, backend.LeaseHolder{RunID: "run-b"})
	if err != nil {
		t.Fatalf("expired lease still blocks (a slow clock): %v", err)
	}
	lb.Release(ctx)
}

// TestLostLeaseNamesTheWinner: a run whose lease a resume of it took over
// (the same run ID; the holder's PID is dead in this PID space, as the
// resume sees it) stops, and its refusal names the process that holds the
// lease now, not "nobody".
func TestLostLeaseNamesTheWinner(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, _, entries := seedRedrive(t, ctx)
	a := openTopic(t, ctx, dlt, kafkadlq.Options{LeaseTTL: 1500 * time.Millisecond})
	gone := backend.ThisProcess("run-r", time.Now())
	gone.PID = deadPID(t)
	la, err := a.Lease(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	b := openTopic(t, ctx, dlt, kafkadlq.Options{})
	me := backend.ThisProcess("run-r", time.Now())
	lb, err := b.Lease(ctx, me)
	if err != nil {
		t.Fatalf("the resume's takeover: %v", err)
	}
	defer lb.Release(ctx)
	select {
	case <-la.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the first process did not notice it lost its lease")
	}
	_, err = a.Publish(ctx, itemsOf(entries[:1], origin), backend.Markers{RunID: "run-r"})
	var busy *backend.BusyError
	want := fmt.Sprintf("pid %d on %s", me.PID, me.Host)
	if !errors.As(err, &busy) || !strings.Contains(busy.Holder, want) || strings.Contains(busy.Holder, "nobody") {
		t.Fatalf("the process that lost its lease: %v, want a refusal naming %s", err, want)
	}
}

// TestPausedHolderStops: a holder paused (SIGSTOP) past its lease finds,
// once it runs again, that another run took the DLQ: its lease is lost
// and it moves nothing more — not even the chunk it was in.
func TestPausedHolderStops(t *testing.T) {
	broker := kafkaServer(t)
	ctx := ctxFor(t)
	origin, dlt, _, _ := seedRedrive(t, ctx)
	c := exec.Command(os.Args[0], "-test.run=^TestLeaseHolderProcess$", "-test.v")
	c.Env = append(os.Environ(), "KAFKADLQ_CHILD_BOOTSTRAP="+broker.Bootstrap(), "KAFKADLQ_CHILD_DLT="+dlt, "KAFKADLQ_CHILD_ORIGIN="+origin)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	wait := func(prefix string) string {
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("child ended before %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("no %q from the child", prefix)
			}
		}
	}
	wait("moved ")
	if err := c.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the child's 1.5 s lease
	b := openTopic(t, ctx, dlt, kafkadlq.Options{})
	lb, err := b.Lease(ctx, backend.LeaseHolder{RunID: "run-b", PID: os.Getpid(), Host: "h"})
	if err != nil {
		c.Process.Signal(syscall.SIGCONT)
		t.Fatalf("taking the paused holder's expired lease: %v", err)
	}
	defer lb.Release(ctx)
	left := len(scanAll(t, ctx, b, ""))
	c.Process.Signal(syscall.SIGCONT)
	got := wait("stopped ")
	// The refusal names the run that took the lease, not "nobody".
	if !strings.Contains(got, "busy=true") || !strings.Contains(got, "run run-b") || strings.Contains(got, "nobody") {
		t.Fatalf("child: %s", got)
	}
	wait("lost")
	if err := c.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if now := len(scanAll(t, ctx, openTopic(t, ctx, dlt, kafkadlq.Options{}), "")); now != left {
		t.Fatalf("the paused holder moved %d more after losing its lease", left-now)
	}
}

// TestLeaseHolderProcess is TestPausedHolderStops' child: it takes the
// lease with a 1.5 s TTL and moves one entry every 200 ms until refused.
func TestLeaseHolderProcess(t *testing.T) {
	bootstrap := os.Getenv("KAFKADLQ_CHILD_BOOTSTRAP")
	if bootstrap == "" {
		t.Skip("the child of TestPausedHolderStops")
	}
	ctx := context.Background()
	src, err := kafkadlq.Open(ctx, "kafka://"+bootstrap+"?topic="+os.Getenv("KAFKADLQ_CHILD_DLT"), kafkadlq.Options{LeaseTTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.Lease(ctx, backend.LeaseHolder{RunID: "run-a", PID: os.Getpid(), Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	var es []backend.MoveItem
	if err := src.Scan(ctx, "", func(e envelope.Envelope) error {
		es = append(es, backend.MoveItem{Seq: int64(len(es) + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: os.Getenv("KAFKADLQ_CHILD_ORIGIN")})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, it := range es {
		res, err := src.Publish(ctx, []backend.MoveItem{it}, backend.Markers{RunID: "run-a"})
		if err != nil {
			fmt.Printf("stopped %v busy=%v\n", err, errors.Is(err, backend.ErrBusy))
			break
		}
		fmt.Printf("moved %s %v\n", it.ID, res[0].Err)
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-l.Lost():
		fmt.Println("lost")
	case <-time.After(10 * time.Second):
		fmt.Println("not lost")
	}
}
