// Package rediseffects is the Redis effects store: a consumer's hashes of
// event_id → attempts, effects and fingerprint. It is a package of its own
// so that only a program that plugs it in (effects.Stores.Redis) links a
// Redis client.
package rediseffects

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
)

// Effects URLs on Redis:
//
//	redis://[user[:password]@]host[:port][/db]?attempts=HASH&effects=HASH[&fingerprints=HASH]
//	rediss://…same…[&tls_ca=FILE][&tls_server_name=NAME][&tls_insecure=true]
//
// Each hash maps event_id → value, as a consumer keeps them with HINCRBY
// and HSET.

// redisProbe reads the consumer's hashes with one pipeline of HMGETs.
type redisProbe struct {
	rdb      *redis.Client
	display  string
	hashes   []string // attempts, effects[, fingerprints]
	timeout  time.Duration
	password string // only to scrub error messages
}

// Store opens Redis effects stores (effects.Stores.Redis).
type Store struct{}

// Open connects to the store at raw and checks that the named keys are
// hashes (or absent). effects.Stores.Open calls it, with opts.Timeout set,
// and scrubs its errors of the password.
func (Store) Open(ctx context.Context, raw string, opts effects.Options) (effects.Probe, error) {
	return openRedis(ctx, raw, opts)
}

func openRedis(ctx context.Context, raw string, opts effects.Options) (*redisProbe, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, backend.Configf("effects %s: not a valid URL: %v (percent-encode special characters in the user name or password)", backend.RedactUserinfo(raw), effects.URLError(err))
	}
	// The query's errors show no value (backend.ParseURLQuery), and
	// the URL before them none either: a value under a mistyped key may
	// be a secret.
	redisParams := []string{"attempts", "effects", "fingerprints", "tls_ca", "tls_insecure", "tls_server_name"}
	q, err := backend.ParseURLQuery(u.RawQuery, redisParams, backend.StrayAt(raw, u.User != nil))
	if err != nil {
		return nil, backend.Configf("effects %s: %v", backend.URLForError(raw), err)
	}
	for _, k := range redisParams {
		if q.Has(k) && q.Get(k) == "" {
			return nil, backend.Configf("effects %s: query parameter %q is empty", backend.URLForError(raw), k)
		}
	}
	tlsOpts := q.TLS(u.Scheme == "rediss", "rediss")
	if err := q.Err(); err != nil {
		return nil, backend.Configf("effects %s: %v", backend.URLForError(raw), err)
	}
	display := backend.RedactURL(u.String())
	if u.Opaque != "" {
		return nil, backend.Configf("effects %s: want %s://host:port/db?attempts=HASH&effects=HASH", display, u.Scheme)
	}
	hashes := []string{q.Get("attempts"), q.Get("effects")}
	if hashes[0] == "" || hashes[1] == "" {
		return nil, backend.Configf("effects %s: want ?attempts=HASH&effects=HASH (the consumer's hashes of event_id → count)", display)
	}
	if fp := q.Get("fingerprints"); fp != "" {
		hashes = append(hashes, fp)
	}
	host := u.Hostname()
	if host == "" {
		host = "localhost"
	}
	port := "6379"
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, backend.Configf("effects %s: bad port %q (want 1-65535)", display, p)
		}
		port = p
	}
	db := 0
	if path := strings.TrimPrefix(u.Path, "/"); path != "" {
		if db, err = strconv.Atoi(path); err != nil || db < 0 {
			return nil, backend.Configf("effects %s: bad database %q in the path (want a number: redis://host:port/DB)", display, path)
		}
	}
	ro := &redis.Options{
		Addr: net.JoinHostPort(host, port),
		DB:   db,
		// One connection: a probe sends one pipeline at a time.
		PoolSize:              1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		// Off: in its default "auto" mode the client would probe for a
		// Redis Cloud feature on every connection and log when it is absent.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	ro.Username = u.User.Username()
	ro.Password, _ = u.User.Password()
	if _, inURL := u.User.Password(); !inURL {
		ro.Password = opts.Password
	}
	if u.Scheme == "rediss" {
		if ro.TLSConfig, err = tlsOpts.Config(host); err != nil {
			return nil, backend.Configf("effects %s: %v", display, err)
		}
	}
	p := &redisProbe{rdb: redis.NewClient(ro), display: display, hashes: hashes, timeout: opts.Timeout, password: ro.Password}
	if err := p.check(ctx); err != nil {
		_ = p.rdb.Close()
		return nil, backend.Scrub(err, p.password)
	}
	return p, nil
}

// check pings the server and checks that every named key is a hash or
// absent (a consumer that has recorded nothing yet), in one pipeline.
func (p *redisProbe) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pipe := p.rdb.Pipeline()
	pipe.Ping(ctx)
	types := make([]*redis.StatusCmd, len(p.hashes))
	for i, h := range p.hashes {
		types[i] = pipe.Type(ctx, h)
	}
	// Exec's error is the first failed command's, or the connection's
	// (a refused dial, a rejected AUTH) when no command was sent.
	if _, err := pipe.Exec(ctx); err != nil {
		msg := err.Error()
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("%s: connect: %w", p, ctx.Err())
		case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"),
			strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
			return fmt.Errorf("%s: authentication failed: %w (check the user and password in the URL or DLQCTL_EFFECTS_PASSWORD)", p, err)
		case strings.Contains(msg, "DB index is out of range"):
			return backend.Configf("%s: database does not exist on this server: %v", p, err)
		}
		return fmt.Errorf("%s: cannot reach Redis: %w", p, err)
	}
	for i, t := range types {
		if typ := t.Val(); typ != "none" && typ != "hash" {
			return backend.Configf("%s: key %q holds a %s, not a hash of event_id → value", p, p.hashes[i], typ)
		}
	}
	return nil
}

// Records sends one HMGET per hash, all in one pipeline.
func (p *redisProbe) Records(ctx context.Context, eventIDs []string) (map[string]effects.Record, error) {
	ids := effects.Batch(eventIDs)
	res := effects.NewResults(ids)
	if len(ids) == 0 {
		return res.Records(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(p.hashes))
	for i, h := range p.hashes {
		cmds[i] = pipe.HMGet(ctx, h, ids...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, backend.Scrub(fmt.Errorf("%s: HMGET: %w", p, err), p.password)
	}
	values := make([][]any, len(cmds))
	for i, c := range cmds {
		values[i] = c.Val()
		if len(values[i]) != len(ids) {
			return nil, fmt.Errorf("%s: HMGET %s answered %d values for %d fields", p, p.hashes[i], len(values[i]), len(ids))
		}
	}
	for j, id := range ids {
		rec, present := effects.Record{EventID: id}, false
		for i, h := range p.hashes {
			v, ok := values[i][j].(string)
			if !ok {
				continue // nil: the hash has no such field
			}
			present = true
			if i == 2 {
				rec.Fingerprint = v
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %s[%s] = %q: want an integer", p, h, id, effects.Truncate(v, 40))
			}
			if i == 0 {
				rec.Attempts = n
			} else {
				rec.Effects = n
			}
		}
		if present {
			if err := res.Add(rec); err != nil {
				return nil, err
			}
		}
	}
	return res.Records(), nil
}

func (p *redisProbe) String() string { return p.display }

func (p *redisProbe) Close() error {
	err := p.rdb.Close()
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}
