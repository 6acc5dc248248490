package kafkadlq

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// The DLQ lease on Kafka is a record in the state topic under the key
// dlqctl-lease: "take", "renew" and "release" records, each naming the
// run. The state topic has one partition, so every dlqctl sees them in the
// same order and agrees on the holder: reading them in order, a take or
// renew holds the DLQ unless another run's lease is held and unexpired at
// that point; a release by the holder frees it. A taker writes its take,
// reads back, and holds the lease only if it is the holder then — of two
// runs that take at once, the one whose record is first wins and the
// other is refused, whatever their clocks say about each other.
//
// A lease expires LeaseTTL after its last renewal (renewed every third of
// that), so a run killed with -9 blocks others for at most that long; the
// same run ID takes it over at once, so a resume never waits.

type leaseRecord struct {
	Op      string    `json:"op"` // take, renew, release
	RunID   string    `json:"run_id"`
	PID     int       `json:"pid,omitempty"`
	Host    string    `json:"host,omitempty"`
	Since   time.Time `json:"since"`
	At      time.Time `json:"at"`
	Expires time.Time `json:"expires"`
}

func (l leaseRecord) holder() backend.LeaseHolder {
	return backend.LeaseHolder{RunID: l.RunID, PID: l.PID, Host: l.Host, Since: l.Since}
}

// currentLease replays the lease records and returns the holder at now,
// or nil.
func currentLease(recs []leaseRecord, now time.Time) *leaseRecord {
	var cur *leaseRecord
	for i := range recs {
		r := recs[i]
		switch r.Op {
		case "take", "renew":
			if cur == nil || cur.RunID == r.RunID || !r.At.Before(cur.Expires) {
				if cur != nil && cur.RunID == r.RunID && r.Op == "renew" {
					r.Since = cur.Since
				}
				cur = &r
			}
		case "release":
			if cur != nil && cur.RunID == r.RunID {
				cur = nil
			}
		}
	}
	if cur != nil && !now.Before(cur.Expires) {
		return nil
	}
	return cur
}

func (t *Topic) leaseWhat() string { return "DLQ " + t.String() }

// LeaseHolder describes the run holding the DLQ, "" when none does.
func (t *Topic) LeaseHolder(ctx context.Context) (string, error) {
	st, err := t.loadState(ctx, true)
	if err != nil {
		return "", err
	}
	if cur := currentLease(st.leases, t.now()); cur != nil {
		return cur.holder().String(), nil
	}
	return "", nil
}

// Lease takes the DLQ for h.RunID (see the comment above leaseRecord).
func (t *Topic) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	if h.RunID == "" {
		return nil, fmt.Errorf("kafka: a lease needs a run ID")
	}
	if err := t.ensureStateTopic(ctx); err != nil {
		return nil, err
	}
	// Fence this run's earlier producer first. A run killed (or cut off
	// by a broker restart) inside a transaction leaves it open, and the
	// lease records behind it cannot be read committed until it ends:
	// without the fence that is the transaction timeout at best, and after
	// a broker restart under load it was minutes. Initializing the run's
	// transactional ID aborts it at once. Only this run's ID is fenced, so
	// another run's transaction is never touched.
	if _, err := t.txnClient(ctx, h.RunID); err != nil {
		return nil, err
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return nil, err
	}
	if cur := currentLease(st.leases, t.now()); cur != nil && cur.RunID != h.RunID {
		return nil, &backend.BusyError{What: t.leaseWhat(), Holder: cur.holder().String()}
	}
	if h.Since.IsZero() {
		h.Since = t.now()
	}
	if err := t.writeLease(ctx, "take", h); err != nil {
		return nil, err
	}
	if st, err = t.loadState(ctx, true); err != nil {
		return nil, err
	}
	cur := currentLease(st.leases, t.now())
	if cur == nil || cur.RunID != h.RunID {
		holder := "another run"
		if cur != nil {
			holder = cur.holder().String()
		}
		return nil, &backend.BusyError{What: t.leaseWhat(), Holder: holder}
	}
	// Renewals outlive the call that took the lease, not its values.
	l := &lease{t: t, h: h, ctx: context.WithoutCancel(ctx), lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.renew()
	return l, nil
}

func (t *Topic) writeLease(ctx context.Context, op string, h backend.LeaseHolder) error {
	now := t.now().UTC()
	v, _ := json.Marshal(leaseRecord{Op: op, RunID: h.RunID, PID: h.PID, Host: h.Host, Since: h.Since.UTC(), At: now, Expires: now.Add(t.leaseTTL)})
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.produceState(rctx, []*kgo.Record{{Key: []byte(leaseKey), Value: v}})
	if err == nil {
		err = res.FirstErr()
	}
	if err != nil {
		return t.connErr(ctx, op+" the DLQ lease", err)
	}
	return nil
}

type lease struct {
	t    *Topic
	ctx  context.Context
	h    backend.LeaseHolder
	lost chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (l *lease) Lost() <-chan struct{} { return l.lost }

// renew writes a renew record every third of the TTL; a renewal that
// fails past the expiry means another run may hold the DLQ now.
func (l *lease) renew() {
	defer close(l.done)
	tick := time.NewTicker(l.t.leaseTTL / 3)
	defer tick.Stop()
	last := l.t.now()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(l.ctx, l.t.leaseTTL/3)
		err := l.t.writeLease(ctx, "renew", l.h)
		cancel()
		if err == nil {
			last = l.t.now()
			continue
		}
		if l.t.now().Sub(last) >= l.t.leaseTTL {
			close(l.lost)
			return
		}
	}
}

// Release stops renewing and writes a release record.
func (l *lease) Release(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		err = l.t.writeLease(ctx, "release", l.h)
	})
	return err
}
