package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
)

var (
	_ backend.Leaser       = (*Stream)(nil)
	_ backend.LeaseChecker = (*Stream)(nil)
)

// DefaultLeaseTTL is how long a lease outlives its last renewal. A run
// renews every third of it; a run that dies holds the DLQ this long at
// most for other runs (its own resume takes it over at once).
const DefaultLeaseTTL = 30 * time.Second

// The lease is one key, dlqctl:lease:{STREAM}, whose value names the
// holder (a JSON token: run ID, PID, host, start time) and which expires
// unless renewed. Every change is conditional on the value, so that a run
// never renews or deletes a lease another run holds.
var (
	// leaseTake sets the key if it is free, or if it holds ARGV[2] (the
	// lease being taken over); it returns the value it found otherwise.
	leaseTake = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if (not v) or v == ARGV[2] or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return {1, ''}
end
return {0, v}`)
	leaseRenew = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	leaseDrop = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

type leaseToken struct {
	RunID string `json:"run_id"`
	PID   int    `json:"pid"`
	Host  string `json:"host"`
	// Boot and PIDNS place the PID (backend.SamePIDSpace); absent from
	// leases written before they were recorded.
	Boot  string    `json:"boot_id,omitempty"`
	PIDNS string    `json:"pid_ns,omitempty"`
	Since time.Time `json:"since"`
}

func (t leaseToken) holder() backend.LeaseHolder {
	return backend.LeaseHolder{RunID: t.RunID, PID: t.PID, Host: t.Host, BootID: t.Boot, PIDNamespace: t.PIDNS, Since: t.Since}
}

func (s *Stream) leaseKey() string { return "dlqctl:lease:{" + s.key + "}" }

// Lease takes the DLQ for h.RunID with SET NX PX (in a script). A lease
// left by the same run ID is taken over at once when its process is
// provably gone: in this PID space (same host, boot and PID namespace)
// its PID is dead. From another host or PID namespace that cannot be
// checked, so the lease is judged by its expiry like any other holder's:
// two live processes resuming copies of one journal are refused wherever
// they run, and a resume on another host waits at most one TTL for a
// crashed holder's lease to lapse.
func (s *Stream) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	ttl := s.leaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	tok, _ := json.Marshal(leaseToken{RunID: h.RunID, PID: h.PID, Host: h.Host, Boot: h.BootID, PIDNS: h.PIDNamespace, Since: h.Since.UTC()})
	token := string(tok)
	prev := ""
	for attempt := 0; attempt < 2; attempt++ {
		res, err := leaseTake.Run(ctx, s.rdb, []string{s.leaseKey()}, token, prev, ttl.Milliseconds()).Slice()
		if err != nil {
			return nil, s.cmdErr(ctx, "lease", err)
		}
		if n, _ := res[0].(int64); n == 1 {
			return s.keepLease(ctx, token, ttl), nil
		}
		found, _ := res[1].(string)
		var cur leaseToken
		if json.Unmarshal([]byte(found), &cur) != nil {
			return nil, &backend.BusyError{What: "DLQ " + s.String(), Holder: "an unreadable lease " + s.leaseKey()}
		}
		if cur.RunID != h.RunID || !backend.HolderGone(cur.holder(), h) || prev != "" {
			return nil, &backend.BusyError{What: "DLQ " + s.String(), Holder: cur.holder().String()}
		}
		prev = found // our own run's lease, left by a crash: take it over
	}
	return nil, &backend.BusyError{What: "DLQ " + s.String(), Holder: "a run that took the lease meanwhile"}
}

type redisLease struct {
	*backend.KeepAlive
	s     *Stream
	token string
}

// keepLease renews the lease every ttl/3 until Release. A renewal that
// finds another value, or no success for a whole ttl, closes Lost: the
// lease may be someone else's by then.
func (s *Stream) keepLease(ctx context.Context, token string, ttl time.Duration) *redisLease {
	l := &redisLease{s: s, token: token}
	l.KeepAlive = backend.StartKeepAlive(ctx, ttl/3, ttl, func(ctx context.Context) error {
		n, err := leaseRenew.Run(ctx, s.rdb, []string{s.leaseKey()}, token, ttl.Milliseconds()).Int64()
		if err == nil && n != 1 {
			return backend.ErrLeaseLost
		}
		return err
	})
	return l
}

// Release stops renewing and deletes the key if it is still ours.
func (l *redisLease) Release(ctx context.Context) error {
	l.Stop()
	if err := leaseDrop.Run(context.WithoutCancel(ctx), l.s.rdb, []string{l.s.leaseKey()}, l.token).Err(); err != nil {
		return fmt.Errorf("%s: release lease: %w", l.s, err)
	}
	return nil
}

// LeaseHolder describes the run holding the DLQ, "" when none does.
func (s *Stream) LeaseHolder(ctx context.Context) (string, error) {
	v, err := s.rdb.Get(ctx, s.leaseKey()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", s.cmdErr(ctx, "lease", err)
	}
	var cur leaseToken
	if json.Unmarshal([]byte(v), &cur) != nil {
		return "an unreadable lease " + s.leaseKey(), nil
	}
	return cur.holder().String(), nil
}
