package effects

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/report"
)

// DefaultTable is the consumer's table when Options.Table is empty.
const DefaultTable = "inbox"

// DefaultTimeout bounds Open and each Records call when Options.Timeout is
// zero: a consumer store that hangs must not hang a redrive.
const DefaultTimeout = 30 * time.Second

// Supported lists the --effects URL forms, for help texts and errors.
const Supported = "sqlite:PATH, postgres://…, postgresql://…, redis://…, rediss://…, exec:COMMAND, exec+ndjson:COMMAND, http://…, https://…"

// redacted replaces a password or token wherever a probe is shown.
const redacted = backend.Redacted

// Options are what Open takes besides the URL. The package reads no
// environment: the caller passes DLQCTL_EFFECTS_PASSWORD and the like in.
type Options struct {
	// Query replaces the table query of a postgres probe (--effects-query).
	// $1 is bound to the batch's event IDs as text[]; the query returns
	// event_id, attempts, effects, fingerprint and, optionally, status.
	// NULLs read as 0 and "".
	Query string
	// Table is the consumer's table for sqlite and postgres probes; ""
	// means DefaultTable. A plain identifier, optionally schema-qualified
	// (schema.table); it is quoted, so its case matters.
	Table string
	// Password is used by postgres and redis probes when the URL carries
	// none.
	Password string
	// Token is sent by http(s) probes as "Authorization: Bearer TOKEN".
	Token string
	// HTTPClient sends the requests of http(s) probes; nil means a client
	// with a clone of Go's default transport.
	HTTPClient *http.Client
	// Environ is the environment an exec: command starts from, before the
	// secrets are taken out of it; nil means os.Environ.
	Environ func() []string
	// Timeout bounds Open's connection and each Records call on top of
	// their ctx; zero means DefaultTimeout.
	Timeout time.Duration
}

// Store is a kind of effects store that lives in a package of its own.
type Store interface {
	Open(ctx context.Context, rawURL string, opts Options) (Probe, error)
}

// Stores opens the effects stores of a build: this package's (sqlite,
// postgres, exec, http) and the Redis store, which lives in
// effects/rediseffects with its client so that a program that reads no
// Redis store does not link one. The zero Stores refuses redis:// URLs.
type Stores struct {
	// Redis opens redis:// and rediss:// stores (rediseffects.Store).
	Redis Store
}

// Open parses rawURL (the reconciliation contract, docs/consumer-contract.md), connects where the probe holds a connection
// and checks what can be checked before the first batch: that the sqlite
// file and table exist, that the postgres query runs, that the redis hashes
// are hashes.
//
// A URL or option that is wrong as written — an unknown scheme, a missing
// parameter, a table or query the database rejects — is a
// *backend.ConfigError. No error and no String carries a password or
// token.
func (s Stores) Open(ctx context.Context, rawURL string, opts Options) (Probe, error) {
	if opts.Timeout < 0 {
		return nil, backend.Configf("effects: timeout %s: want a positive duration", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	scheme := schemeOf(rawURL)
	switch scheme {
	case "sqlite", "postgres", "postgresql", "redis", "rediss", "exec", "exec+ndjson", "http", "https":
	case "":
		return nil, backend.Configf("effects %q: no scheme (supported: %s)", backend.RedactUserinfo(rawURL), Supported)
	default:
		return nil, backend.Configf("effects %s: unknown scheme %q (supported: %s)", backend.RedactUserinfo(rawURL), scheme, Supported)
	}
	if opts.Query != "" && scheme != "postgres" && scheme != "postgresql" {
		return nil, backend.Configf("effects %s: a query (--effects-query) needs a postgres:// effects URL", backend.RedactUserinfo(rawURL))
	}
	if opts.Table != "" && scheme != "sqlite" && scheme != "postgres" && scheme != "postgresql" {
		return nil, backend.Configf("effects %s: a table name needs a sqlite: or postgres:// effects URL", backend.RedactUserinfo(rawURL))
	}
	var (
		p   Probe
		err error
	)
	switch scheme {
	case "sqlite":
		p, err = openSQLite(ctx, rawURL[len("sqlite:"):], opts, nil)
	case "postgres", "postgresql":
		p, err = openPostgres(ctx, rawURL, opts)
	case "redis", "rediss":
		if s.Redis == nil {
			return nil, backend.Configf("effects %s: this build has no Redis effects store", backend.RedactUserinfo(rawURL))
		}
		p, err = s.Redis.Open(ctx, rawURL, opts)
	case "exec":
		p, err = openExec(rawURL[len("exec:"):], false, opts)
	case "exec+ndjson":
		p, err = openExec(rawURL[len("exec+ndjson:"):], true, opts)
	case "http", "https":
		p, err = openHTTP(rawURL, opts)
	}
	if err != nil {
		return nil, scrub(err, opts.Password, opts.Token)
	}
	return p, nil
}

// schemeOf is the lower-cased scheme of raw, or "" when it has none.
// url.Parse is no help here: an exec: command or a sqlite: path is no URL.
func schemeOf(raw string) string {
	i := strings.IndexByte(raw, ':')
	if i < 1 {
		return ""
	}
	for j, c := range raw[:i] {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(raw[:i])
}

// Batch is a Records call's event IDs without repeats, in their order.
// Batch, Results, Truncate and URLError are what every store shares,
// exported for the stores in packages of their own (effects/rediseffects).
func Batch(eventIDs []string) []string {
	seen := make(map[string]bool, len(eventIDs))
	out := make([]string, 0, len(eventIDs))
	for _, id := range eventIDs {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Results collects a probe's answer. A record for an event the batch did
// not ask about is dropped (a script may print more than asked); one event
// answered twice is an error, because two records for one event leave its
// verdict undecidable.
type Results struct {
	asked map[string]bool
	got   map[string]Record
}

// NewResults collects the answer to a batch of ids (from Batch).
func NewResults(ids []string) *Results {
	r := &Results{asked: make(map[string]bool, len(ids)), got: make(map[string]Record, len(ids))}
	for _, id := range ids {
		r.asked[id] = true
	}
	return r
}

// Add takes one record of the answer.
func (r *Results) Add(rec Record) error {
	if !r.asked[rec.EventID] {
		return nil
	}
	if _, dup := r.got[rec.EventID]; dup {
		return fmt.Errorf("event %q answered twice: want one record per event_id", rec.EventID)
	}
	r.got[rec.EventID] = rec
	return nil
}

// Records are the records added, by event ID.
func (r *Results) Records() map[string]Record { return r.got }

// identifier checks a table name and quotes it for SQL.
func identifier(table string) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return "", backend.Configf("effects table %q: want NAME or SCHEMA.NAME", table)
	}
	for i, p := range parts {
		if !plainIdentifier(p) {
			return "", backend.Configf("effects table %q: want a plain identifier (letters, digits and _, not starting with a digit)", table)
		}
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, "."), nil
}

func plainIdentifier(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// URLError is the reason of a url.Parse error without the URL, which
// url.Error quotes whole, password included.
func URLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Truncate shortens what a consumer's command or server said, for an
// error message.
//
// It is also made safe for a terminal, as table cells are (report.Truncate):
// escape sequences and other control characters become spaces and invalid
// UTF-8 becomes U+FFFD, so a consumer's error page cannot move the cursor,
// retitle the window or hide text.
func Truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…(truncated)"
	}
	return report.Truncate(s, 0)
}

// scrub hides secrets in an error's text (backend.Scrub).
func scrub(err error, secrets ...string) error { return backend.Scrub(err, secrets...) }

// redactURL shows u with its password and any secret-named query value
// replaced (backend.RedactURL, the one redactor).
func redactURL(u *url.URL) string { return backend.RedactURL(u.String()) }

// maskQuery shows an effects URL with its password and the values of the
// query keys that mask says may be secrets masked: an http(s) endpoint's
// parameters are the consumer's own, and a postgres URL's keys that the
// driver does not know go to the server, so dlqctl cannot tell which are
// secrets (api_kee=, passwrod=).
func maskQuery(u *url.URL, mask func(key string) bool) string {
	c := *u
	if c.RawQuery != "" {
		q := c.Query()
		for k, vs := range q {
			if mask(k) {
				for i := range vs {
					vs[i] = redacted
				}
			}
		}
		c.RawQuery = q.Encode()
	}
	return redactURL(&c)
}
