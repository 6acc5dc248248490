package kafkadlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// The DLQ lease on Kafka is a sequence of records in the state topic under
// the key dlqctl-lease: "take", "renew" and "release". The state topic has
// one partition, so every dlqctl reads them in the same order, and its
// records carry the broker's clock (message.timestamp.type=LogAppendTime),
// so no host's clock decides who holds the DLQ:
//
//   - A take holds the DLQ from its own offset on — that offset is the
//     lease's epoch — when nobody holds it at the take's broker time (never
//     taken, released, or the last renewal is older than its TTL). A take
//     that names the epoch it takes over ("over") replaces that lease: a
//     resume of the same run whose process is gone.
//   - A renew names its epoch and counts only while that epoch holds and
//     has not expired at the renew's broker time; one that comes late (a
//     paused holder) counts for nothing, and its writer stops.
//   - A release names its epoch and frees the DLQ if that epoch holds it.
//
// A taker writes its take, reads back, and holds the DLQ only if its take
// is the holder then. Having won, it starts the DLT's transactional
// producer (one transactional ID per DLT), which fences the previous
// holder's producer: a holder that lost the lease while paused cannot
// commit another chunk even if it has not noticed yet.
//
// A holder renews every third of its TTL, reading back each time; when the
// records show another epoch holding the DLQ, or no renewal succeeded for
// a whole TTL, Lost is closed and Publish refuses at once.

type leaseRecord struct {
	Op    string    `json:"op"` // take, renew, release
	RunID string    `json:"run_id"`
	PID   int       `json:"pid,omitempty"`
	Host  string    `json:"host,omitempty"`
	Boot  string    `json:"boot_id,omitempty"`
	PIDNS string    `json:"pid_ns,omitempty"`
	Since time.Time `json:"since"`
	TTLms int64     `json:"ttl_ms"`
	// Epoch is the offset of the take a renew or release belongs to.
	Epoch int64 `json:"epoch"`
	// Over is the epoch a take replaces (a resume taking over its own
	// run's lease), nil for a plain take.
	Over *int64 `json:"over,omitempty"`

	offset int64     // where the record is
	ts     time.Time // the broker's time of the record
}

func (l leaseRecord) holder() backend.LeaseHolder {
	return backend.LeaseHolder{RunID: l.RunID, PID: l.PID, Host: l.Host, BootID: l.Boot, PIDNamespace: l.PIDNS, Since: l.Since}
}

// heldLease is the lease as the records leave it.
type heldLease struct {
	leaseRecord // the take (or, after compaction, the first record left)
	epoch       int64
	expires     time.Time // by the broker's clock
}

// maxLeaseTTL bounds the TTL a lease record is held to: dlqctl's own
// last 30 s, and no record, whoever wrote it, holds the DLQ for longer
// than this without a renewal.
const maxLeaseTTL = 10 * time.Minute

func (r leaseRecord) expiry() time.Time {
	return r.ts.Add(min(time.Duration(r.TTLms)*time.Millisecond, maxLeaseTTL))
}

// replayLease returns the lease the records leave held (expired or not),
// or nil. Compaction may have removed the first records: a renew that is
// the first one left stands for its take.
func replayLease(recs []leaseRecord) *heldLease {
	var cur *heldLease
	for i, r := range recs {
		switch r.Op {
		case "take":
			free := cur == nil || !r.ts.Before(cur.expires)
			over := cur != nil && r.Over != nil && *r.Over == cur.epoch && cur.RunID == r.RunID
			if free || over || (i == 0 && r.Over != nil) {
				cur = &heldLease{leaseRecord: r, epoch: r.offset, expires: r.expiry()}
			}
		case "renew":
			switch {
			case cur != nil && cur.epoch == r.Epoch && r.ts.Before(cur.expires):
				cur.expires = r.expiry()
			case cur == nil && i == 0:
				cur = &heldLease{leaseRecord: r, epoch: r.Epoch, expires: r.expiry()}
			}
		case "release":
			if cur != nil && cur.epoch == r.Epoch {
				cur = nil
			}
		}
	}
	return cur
}

func (t *Topic) leaseWhat() string { return "DLQ " + t.String() }

// LeaseHolder describes the run holding the DLQ, "" when none does. It
// decides nothing (import asks it), so a lease whose last renewal is older
// than its TTL by this host's clock reads as free.
func (t *Topic) LeaseHolder(ctx context.Context) (string, error) {
	m, err := t.readMeta(ctx, t.src.stateTopic)
	if err != nil {
		return "", err
	}
	if cur := replayLease(m.leases); cur != nil && t.now().Before(cur.expires) {
		return cur.holder().String(), nil
	}
	return "", nil
}

// Lease takes the DLQ for h.RunID (see the comment above leaseRecord). A
// lease of the same run ID is taken over only when its process is gone:
// on this host its PID must be dead, so two live processes resuming copies
// of one journal are refused; on another host that cannot be checked and
// the run ID is trusted (the takeover fences the old process all the same).
func (t *Topic) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	if h.RunID == "" {
		return nil, fmt.Errorf("kafka: a lease needs a run ID")
	}
	t.setMetaRun(h.RunID)
	if err := t.ensureStateTopic(ctx); err != nil {
		return nil, err
	}
	m, err := t.readMeta(ctx, t.src.stateTopic)
	if err != nil {
		return nil, err
	}
	var over *int64
	if cur := replayLease(m.leases); cur != nil && cur.RunID == h.RunID {
		if !backend.HolderGone(cur.holder(), h) {
			return nil, &backend.BusyError{What: t.leaseWhat(), Holder: cur.holder().String() + ", which is still running"}
		}
		e := cur.epoch
		over = &e
	}
	// Whether another run's lease has expired is for the broker's clock
	// to say: the take is written and read back.
	if h.Since.IsZero() {
		h.Since = t.now()
	}
	epoch, err := t.writeLease(ctx, leaseRecord{Op: "take", Over: over}, h)
	if err != nil {
		return nil, err
	}
	if m, err = t.readMeta(ctx, t.src.stateTopic); err != nil {
		return nil, err
	}
	if cur := replayLease(m.leases); cur == nil || cur.epoch != epoch {
		holder := "another run"
		if cur != nil {
			holder = cur.holder().String()
		}
		return nil, &backend.BusyError{What: t.leaseWhat(), Holder: holder}
	}
	t.mu.Lock()
	t.held = epoch
	t.mu.Unlock()
	// Fence the previous holder's producer: a run killed (or cut off by a
	// broker restart) inside a transaction leaves it open, and the state
	// behind it cannot be read committed until it ends; a paused holder
	// must never commit again. Initializing the DLT's transactional ID
	// aborts its transaction at once.
	if err := t.fenceProducer(ctx); err != nil {
		return nil, err
	}
	// Renewals outlive the call that took the lease, not its values.
	l := &lease{t: t, h: h, epoch: epoch, last: time.Now()}
	l.KeepAlive = backend.StartKeepAlive(ctx, t.leaseTTL/3, 0, l.renew)
	return l, nil
}

// writeLease writes a lease record and returns its offset.
func (t *Topic) writeLease(ctx context.Context, r leaseRecord, h backend.LeaseHolder) (int64, error) {
	r.RunID, r.PID, r.Host, r.Boot, r.PIDNS, r.Since, r.TTLms = h.RunID, h.PID, h.Host, h.BootID, h.PIDNamespace, h.Since.UTC(), t.leaseTTL.Milliseconds()
	v, _ := json.Marshal(r)
	rctx, cancel := context.WithTimeout(ctx, t.metaTimeout())
	defer cancel()
	rec := &kgo.Record{Topic: t.src.stateTopic, Key: []byte(leaseKey), Value: v}
	if err := t.writeMeta(rctx, rec); err != nil {
		return 0, t.connErr(ctx, r.Op+" the DLQ lease", err)
	}
	return rec.Offset, nil
}

// leaseHeld checks, before a chunk moves, that the lease this Topic took
// (if any) still holds by the records: a holder that was paused past its
// TTL learns it here, before writing anything.
func (t *Topic) leaseHeld(ctx context.Context) error {
	t.mu.Lock()
	held := t.held
	t.mu.Unlock()
	switch held {
	case noEpoch:
		return nil
	case lostEpoch:
		return t.lostErr(t.leaseNow(ctx))
	}
	m, err := t.readMeta(ctx, t.src.stateTopic)
	if err != nil {
		return err
	}
	if cur := replayLease(m.leases); cur == nil || cur.epoch != held {
		return t.lostErr(cur)
	}
	return nil
}

// lostErr is the refusal of a run whose lease another run took; cur is
// the lease as the records leave it (nil: nobody's, or they could not be
// read), and the holder it names is remembered for later refusals.
func (t *Topic) lostErr(cur *heldLease) error {
	t.mu.Lock()
	held := t.held
	t.held = lostEpoch
	if cur != nil && cur.epoch != held {
		t.lostTo = cur.holder().String()
	}
	holder := t.lostTo
	t.mu.Unlock()
	if holder == "" {
		holder = "nobody (this run's lease expired)"
	}
	return &backend.BusyError{What: t.leaseWhat(), Holder: holder + "; this run lost its lease and stopped"}
}

// leaseNow is the lease as the records leave it now, nil when none holds
// it or they cannot be read: what a refusal names.
func (t *Topic) leaseNow(ctx context.Context) *heldLease {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
	defer cancel()
	m, err := t.readMeta(rctx, t.src.stateTopic)
	if err != nil {
		return nil
	}
	return replayLease(m.leases)
}

// lostEpoch marks a Topic whose lease was lost: it moves nothing more.
const lostEpoch = -2

// fencedErr turns the broker's fencing of this run's producer into the
// lease refusal it means, naming the run that holds the lease now.
func (t *Topic) fencedErr(ctx context.Context, err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("%w (%v)", t.lostErr(t.leaseNow(ctx)), err)
	}
	return err
}

type lease struct {
	*backend.KeepAlive
	t     *Topic
	h     backend.LeaseHolder
	epoch int64
	last  time.Time // the last renewal that held, on this host's monotonic clock
	once  sync.Once
}

// renew writes a renew record and reads back: when another epoch holds
// the DLQ, or no renewal succeeded for a whole TTL, the lease is lost,
// and the Topic refuses to move from then on.
func (l *lease) renew(ctx context.Context) error {
	_, err := l.t.writeLease(ctx, leaseRecord{Op: "renew", Epoch: l.epoch}, l.h)
	var m meta
	if err == nil {
		m, err = l.t.readMeta(ctx, l.t.src.stateTopic)
	}
	if err == nil {
		if cur := replayLease(m.leases); cur == nil || cur.epoch != l.epoch {
			return fmt.Errorf("%w: %v", backend.ErrLeaseLost, l.t.lostErr(cur))
		}
		l.last = time.Now()
		return nil
	}
	if time.Since(l.last) >= l.t.leaseTTL {
		return fmt.Errorf("%w: %v", backend.ErrLeaseLost, l.t.lostErr(nil))
	}
	return err
}

// Release stops renewing and writes a release record.
func (l *lease) Release(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		l.Stop()
		l.t.mu.Lock()
		if l.t.held == l.epoch {
			l.t.held = noEpoch
		}
		l.t.mu.Unlock()
		_, err = l.t.writeLease(ctx, leaseRecord{Op: "release", Epoch: l.epoch}, l.h)
	})
	return err
}

// noEpoch: the Topic holds no lease.
const noEpoch = -1
