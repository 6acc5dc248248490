package natsdlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
)

// The DLQ lease is a key in a KV bucket (lease_bucket, default
// dlqctl_leases) whose entries expire LeaseTTL after their last write: the
// key is the DLQ stream's name, the value the holder. Create succeeds only
// when the key is absent, and a renewal is an Update conditional on the
// revision the holder wrote last, so two runs can never both hold it; a
// holder killed with -9 stops renewing and its key expires.
const (
	// LeaseTTL is how long a lease outlives its holder's last renewal.
	LeaseTTL   = 30 * time.Second
	leaseRenew = LeaseTTL / 3
)

type leaseDoc struct {
	RunID string `json:"run_id"`
	PID   int    `json:"pid"`
	Host  string `json:"host"`
	// Boot and PIDNS place the PID (backend.SamePIDSpace); absent from
	// leases written before they were recorded.
	Boot  string    `json:"boot_id,omitempty"`
	PIDNS string    `json:"pid_ns,omitempty"`
	Since time.Time `json:"since"`
}

func (d leaseDoc) holder() backend.LeaseHolder {
	return backend.LeaseHolder{RunID: d.RunID, PID: d.PID, Host: d.Host, BootID: d.Boot, PIDNamespace: d.PIDNS, Since: d.Since}
}

// leaseKey is the DLQ's key in the bucket: the stream name, which holds
// only characters a key may hold once dots are ruled out (stream names
// have none) — anything else is escaped.
func (s *Stream) leaseKey() string {
	b := []byte(s.src.stream)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '='
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

func (s *Stream) leaseBucket(ctx context.Context) (jetstream.KeyValue, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	kv, err := s.js.KeyValue(rctx, s.src.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(rctx, jetstream.KeyValueConfig{
			Bucket: s.src.bucket, Description: "dlqctl: one redrive or resolve run at a time per DLQ",
			TTL: LeaseTTL, History: 1, Storage: jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(rctx, s.src.bucket)
		}
	}
	if err != nil {
		return nil, s.wrap("open the lease bucket "+s.src.bucket, err)
	}
	return kv, nil
}

func (s *Stream) busy(d leaseDoc) error {
	return &backend.BusyError{What: "DLQ " + s.String(), Holder: d.holder().String()}
}

// readLease returns the holder and the revision of its last write; ok is
// false when nobody holds the lease.
func readLease(ctx context.Context, kv jetstream.KeyValue, key string) (leaseDoc, uint64, bool, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return leaseDoc{}, 0, false, nil
	}
	if err != nil {
		return leaseDoc{}, 0, false, err
	}
	var d leaseDoc
	if json.Unmarshal(e.Value(), &d) != nil || d.RunID == "" {
		// Unreadable: nobody can renew it; taken over by revision.
		return leaseDoc{RunID: "(unreadable lease)"}, e.Revision(), true, nil
	}
	return d, e.Revision(), true, nil
}

// Lease takes the DLQ for h.RunID (backend.Leaser). A lease that the same
// run ID holds (a crashed run being resumed) is taken over once its
// process is provably gone (backend.HolderGone); from another host or PID
// namespace it is waited out. A DLQ stream
// whose deletes a crash can undo is refused (checkDurableDLQ): every run
// that moves entries takes the lease first.
func (s *Stream) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	if h.RunID == "" {
		return nil, fmt.Errorf("%s: lease: no run ID", s)
	}
	if err := s.checkDurableDLQ(ctx); err != nil {
		return nil, err
	}
	if h.PID == 0 {
		me := backend.ThisProcess(h.RunID, h.Since)
		h.PID, h.BootID, h.PIDNamespace = me.PID, me.BootID, me.PIDNamespace
		if h.Host == "" {
			h.Host = me.Host
		}
	}
	if h.Since.IsZero() {
		h.Since = s.now()
	}
	kv, err := s.leaseBucket(ctx)
	if err != nil {
		return nil, err
	}
	doc := leaseDoc{RunID: h.RunID, PID: h.PID, Host: h.Host, Boot: h.BootID, PIDNS: h.PIDNamespace, Since: h.Since.UTC()}
	val, _ := json.Marshal(doc) // strings, an int and a time always marshal
	key := s.leaseKey()
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	rev, err := kv.Create(rctx, key, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
		cur, curRev, ok, rerr := readLease(rctx, kv, key)
		switch {
		case rerr != nil:
			return nil, s.wrap("read the lease", rerr)
		case !ok:
			rev, err = kv.Create(rctx, key, val) // expired between the two calls
		case cur.RunID != h.RunID || !backend.HolderGone(cur.holder(), h):
			return nil, s.busy(cur)
		default:
			rev, err = kv.Update(rctx, key, val, curRev)
		}
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			if cur, _, ok, rerr := readLease(rctx, kv, key); rerr == nil && ok {
				return nil, s.busy(cur)
			}
			return nil, &backend.BusyError{What: "DLQ " + s.String(), Holder: "another run (the lease changed while it was being taken)"}
		}
		return nil, s.wrap("take the lease", err)
	}
	l := &lease{s: s, kv: kv, key: key, val: val, rev: rev}
	l.KeepAlive = backend.StartKeepAlive(ctx, s.leaseEvery, LeaseTTL, l.renew)
	return l, nil
}

// LeaseHolder describes the run holding the lease, "" for none.
func (s *Stream) LeaseHolder(ctx context.Context) (string, error) {
	kv, err := s.leaseBucket(ctx)
	if err != nil {
		return "", err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	d, _, ok, err := readLease(rctx, kv, s.leaseKey())
	if err != nil || !ok {
		return "", err
	}
	return d.holder().String(), nil
}

type lease struct {
	*backend.KeepAlive
	s   *Stream
	kv  jetstream.KeyValue
	key string
	val []byte
	mu  sync.Mutex
	rev uint64
}

// renew rewrites the key, conditional on the revision it wrote last.
// Another writer's revision loses the lease at once; failures (the server
// away) lose it once LeaseTTL has passed since the last successful write,
// when the key may have expired.
func (l *lease) renew(ctx context.Context) error {
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	next, err := l.kv.Update(ctx, l.key, l.val, rev)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		l.mu.Lock()
		l.rev = next
		l.mu.Unlock()
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return fmt.Errorf("%w: %v", backend.ErrLeaseLost, err)
	}
	return err
}

// Release stops renewing and deletes the key if this run wrote it last.
func (l *lease) Release(ctx context.Context) error {
	l.Stop()
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	rctx, cancel := l.s.reqCtx(ctx)
	defer cancel()
	err := l.kv.Purge(rctx, l.key, jetstream.LastRevision(rev))
	var apiErr *jetstream.APIError
	if err != nil && !(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
		return l.s.wrap("release the lease", err)
	}
	return nil
}
