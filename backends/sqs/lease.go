package sqsdlq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqctl/dlqctl/backend"
)

// The DLQ lease on SQS is a queue tag. SQS has no compare-and-set, so a
// run writes the tag and reads it back after a settle delay: of runs that
// start together, the last writer wins and every other one finds the
// winner's tag on reading back and gives up. That holds while the settle
// delay (lease_settle, default 2 s) is longer than the time between one
// run reading the tag free and writing it, plus the time a tag write takes
// to be seen by other readers; docs/sqs.md says so.
const (
	// LeaseTag is the tag key holding the lease.
	LeaseTag = "dlqctl-lease"
	// leaseTTL is how long a lease lasts without renewal: a run killed
	// with -9 leaves a tag that another run may take after this.
	leaseTTL   = 2 * time.Minute
	leaseRenew = 30 * time.Second
)

// leaseValue is the tag's value: run ID, PID, where (hostField), start
// and expiry (Unix seconds), separated by "|" (run IDs and host names hold
// none).
type leaseValue struct {
	holder  backend.LeaseHolder
	expires time.Time
}

func (v leaseValue) String() string {
	h := v.holder
	return strings.Join([]string{h.RunID, strconv.Itoa(h.PID), hostField(h), strconv.FormatInt(h.Since.Unix(), 10), strconv.FormatInt(v.expires.Unix(), 10)}, "|")
}

func parseLease(s string) (leaseValue, bool) {
	p := strings.Split(s, "|")
	if len(p) != 5 || p[0] == "" {
		return leaseValue{}, false
	}
	pid, err1 := strconv.Atoi(p[1])
	since, err2 := strconv.ParseInt(p[3], 10, 64)
	exp, err3 := strconv.ParseInt(p[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return leaseValue{}, false
	}
	h := backend.LeaseHolder{RunID: p[0], PID: pid, Since: time.Unix(since, 0).UTC()}
	h.Host, h.BootID, h.PIDNamespace = parseHostField(p[2])
	return leaseValue{holder: h, expires: time.Unix(exp, 0)}, true
}

// hostField is where the holder runs, as the tag keeps it: its host name,
// then, where known, its boot ID and PID namespace: HOST/BOOT/PIDNS. They
// share the host's field rather than adding fields of their own, so that
// a dlqctl that knows only five fields still reads the tag, and reads a
// holder it cannot place as one on another host: the safe reading.
func hostField(h backend.LeaseHolder) string {
	clean := strings.NewReplacer("|", "_", "/", "_").Replace
	if h.BootID == "" && h.PIDNamespace == "" {
		return clean(h.Host)
	}
	return clean(h.Host) + "/" + clean(h.BootID) + "/" + clean(h.PIDNamespace)
}

// parseHostField reads hostField; a tag written before the boot ID and
// namespace were recorded holds the host name alone.
func parseHostField(s string) (host, boot, pidns string) {
	host, rest, ok := strings.Cut(s, "/")
	if !ok {
		return s, "", ""
	}
	boot, pidns, _ = strings.Cut(rest, "/")
	return host, boot, pidns
}

func (q *Queue) readLease(ctx context.Context) (leaseValue, bool, error) {
	out, err := q.c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(q.url)})
	if err != nil {
		return leaseValue{}, false, q.wrap(ctx, "read the lease tag", err)
	}
	raw, ok := out.Tags[LeaseTag]
	if !ok {
		return leaseValue{}, false, nil
	}
	v, ok := parseLease(raw)
	if !ok {
		// Unreadable: nobody can renew it, so it counts as expired.
		return leaseValue{}, false, nil
	}
	return v, true, nil
}

func (q *Queue) writeLease(ctx context.Context, v leaseValue) error {
	_, err := q.c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(q.url), Tags: map[string]string{LeaseTag: v.String()}})
	if err != nil {
		return q.wrap(ctx, "write the lease tag", err)
	}
	return nil
}

func (q *Queue) busy(v leaseValue) error {
	return &backend.BusyError{What: "DLQ " + q.String(), Holder: v.holder.String() + ", lease until " + v.expires.UTC().Format(time.RFC3339)}
}

// Lease takes the DLQ for h.RunID: it refuses at once when another run's
// unexpired tag is there, else writes its own, waits lease_settle and
// reads the tag back; finding another run's there, it refuses. An
// unexpired lease is taken over only as canTakeOver allows: in this PID
// space (backend.SamePIDSpace) when its process is dead (so that two live
// processes resuming copies of one journal are refused, and a run killed
// before its journal existed does not lock the DLQ until the TTL);
// elsewhere never: it is waited out.
func (q *Queue) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	if h.RunID == "" || strings.Contains(h.RunID, "|") {
		return nil, fmt.Errorf("%s: lease: bad run ID %q", q, h.RunID)
	}
	if h.PID == 0 {
		me := backend.ThisProcess(h.RunID, h.Since)
		h.PID, h.BootID, h.PIDNamespace = me.PID, me.BootID, me.PIDNamespace
		if h.Host == "" {
			h.Host = me.Host
		}
	}
	// As the tag keeps them, so that reading it back finds this holder.
	h.Host, h.BootID, h.PIDNamespace = parseHostField(hostField(h))
	if h.Since.IsZero() {
		h.Since = q.now()
	}
	h.Since = time.Unix(h.Since.Unix(), 0).UTC() // as the tag keeps it
	cur, ok, err := q.readLease(ctx)
	if err != nil {
		return nil, err
	}
	if ok && q.now().Before(cur.expires) && !canTakeOver(cur.holder, h) {
		return nil, q.busy(cur)
	}
	mine := leaseValue{holder: h, expires: q.now().Add(leaseTTL)}
	if err := q.writeLease(ctx, mine); err != nil {
		return nil, err
	}
	select {
	case <-time.After(q.src.leaseSettle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	back, ok, err := q.readLease(ctx)
	if err != nil {
		return nil, err
	}
	if !ok || !sameHolder(back.holder, h) {
		if ok {
			return nil, q.busy(back)
		}
		return nil, &backend.BusyError{What: "DLQ " + q.String(), Holder: "another run (the lease tag changed while it was being taken)"}
	}
	l := &lease{q: q, v: mine}
	l.KeepAlive = backend.StartKeepAlive(ctx, q.leaseEvery, 0, l.renew)
	return l, nil
}

// LeaseHolder describes the run holding an unexpired lease, "" for none.
func (q *Queue) LeaseHolder(ctx context.Context) (string, error) {
	v, ok, err := q.readLease(ctx)
	if err != nil || !ok || !q.now().Before(v.expires) {
		return "", err
	}
	return v.holder.String(), nil
}

type lease struct {
	*backend.KeepAlive
	q  *Queue
	mu sync.Mutex
	v  leaseValue
}

// renew rewrites the tag with a new expiry, after checking that it still
// holds it; a tag that is another run's, or a renewal that fails until
// the lease has expired (by the queue's clock), loses the lease.
func (l *lease) renew(ctx context.Context) error {
	cur, ok, err := l.q.readLease(ctx)
	l.mu.Lock()
	v := l.v
	l.mu.Unlock()
	if err == nil && (!ok || !sameHolder(cur.holder, v.holder)) {
		return backend.ErrLeaseLost
	}
	if err == nil {
		next := leaseValue{holder: v.holder, expires: l.q.now().Add(leaseTTL)}
		if err = l.q.writeLease(ctx, next); err == nil {
			l.mu.Lock()
			l.v = next
			l.mu.Unlock()
		}
	}
	if err != nil && !l.q.now().Before(v.expires) {
		return fmt.Errorf("%w: %v", backend.ErrLeaseLost, err)
	}
	return err
}

// Release stops renewing and removes the tag if it is still this run's.
func (l *lease) Release(ctx context.Context) error {
	l.Stop()
	cur, ok, err := l.q.readLease(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	v := l.v
	l.mu.Unlock()
	if !ok || !sameHolder(cur.holder, v.holder) {
		return nil
	}
	if _, err := l.q.c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(l.q.url), TagKeys: []string{LeaseTag}}); err != nil {
		return l.q.wrap(ctx, "remove the lease tag", err)
	}
	return nil
}

func sameHolder(a, b backend.LeaseHolder) bool {
	return a.RunID == b.RunID && a.PID == b.PID && a.Host == b.Host && a.BootID == b.BootID && a.PIDNamespace == b.PIDNamespace && a.Since.Unix() == b.Since.Unix()
}

// canTakeOver says whether me may take an unexpired lease from cur. In
// this PID space (this host, boot and PID namespace), whatever the run:
// when cur's process is dead (a run killed with -9, even before its
// journal existed, leaves nothing a lease still guards; waiting out the
// TTL would only lock the DLQ), or when it is this very process and run.
// Elsewhere — another host, or another container on this one — the
// process cannot be checked, so the lease is judged by its expiry even
// for the same run ID: two live resumes of copies of one journal are
// refused wherever they run.
func canTakeOver(cur, me backend.LeaseHolder) bool {
	if !backend.SamePIDSpace(cur, me) {
		return false
	}
	if cur.PID == me.PID {
		return cur.RunID == me.RunID
	}
	return !backend.ProcessAlive(cur.PID)
}
