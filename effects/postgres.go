package effects

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlqctl/dlqctl/backend"
)

// postgresProbe reads the consumer's table, or runs --effects-query, on one
// connection (not a pool: a probe runs one query at a time).
type postgresProbe struct {
	cfg      *pgx.ConnConfig
	display  string
	query    string
	timeout  time.Duration
	password string // only to scrub error messages

	mu   sync.Mutex
	conn *pgx.Conn
}

func openPostgres(ctx context.Context, raw string, opts Options) (*postgresProbe, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, backend.Configf("effects %s: not a valid URL: %v (percent-encode special characters in the user name or password)", backend.RedactUserinfo(raw), URLError(err))
	}
	query := opts.Query
	if query == "" {
		table, err := identifier(opts.Table)
		if err != nil {
			return nil, err
		}
		query = "SELECT event_id, attempts, effects, fingerprint, status FROM " + table + " WHERE event_id = ANY($1)"
	} else if opts.Table != "" {
		return nil, backend.Configf("effects %s: give a query or a table, not both", backend.URLForError(raw))
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, backend.Configf("effects %s: %s", backend.URLForError(raw), pgParseError(err))
	}
	// A key pgx does not know (a typo such as passwrod= among them) goes
	// to the server as a run-time parameter: its value is masked.
	display := maskQuery(u, func(k string) bool { _, unknown := cfg.RuntimeParams[k]; return unknown })
	if _, inURL := u.User.Password(); !inURL && !u.Query().Has("password") && opts.Password != "" {
		cfg.Password = opts.Password
	}
	// The statement-caching modes prepare a statement on its first use,
	// which is a second round trip; Exec mode sends the query and its
	// text[] argument together, and works behind a transaction pooler.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > opts.Timeout {
		cfg.ConnectTimeout = opts.Timeout
	}
	p := &postgresProbe{cfg: cfg, display: display, query: query, timeout: opts.Timeout, password: cfg.Password}
	if err := p.check(ctx, opts.Query != ""); err != nil {
		_ = p.Close()
		return nil, scrub(err, p.password)
	}
	return p, nil
}

// check connects and runs the query on no event ID, so that a wrong
// table, column or query fails Open rather than the first batch.
func (p *postgresProbe) check(ctx context.Context, custom bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	conn, err := p.connect(ctx)
	if err != nil {
		return err
	}
	rows, err := conn.Query(ctx, p.query, []string{})
	if err != nil {
		return p.queryErr(err)
	}
	n := len(rows.FieldDescriptions())
	rows.Close()
	if err := rows.Err(); err != nil {
		return p.queryErr(err)
	}
	if custom && n != 4 && n != 5 {
		return backend.Configf("%s: the effects query returns %d columns: want event_id, attempts, effects, fingerprint [, status]", p, n)
	}
	return nil
}

// connect opens the connection, again after the server closed it.
func (p *postgresProbe) connect(ctx context.Context) (*pgx.Conn, error) {
	if p.conn != nil && !p.conn.IsClosed() {
		return p.conn, nil
	}
	conn, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		var pe *pgconn.PgError
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s: connect: %w", p, ctx.Err())
		case errors.As(err, &pe) && pe.Code == "3D000": // invalid_catalog_name
			return nil, backend.Configf("%s: %s", p, pe.Message)
		case errors.As(err, &pe) && strings.HasPrefix(pe.Code, "28"): // invalid authorization
			return nil, fmt.Errorf("%s: authentication failed: %s (check the user and password in the URL or DLQCTL_EFFECTS_PASSWORD)", p, pe.Message)
		}
		return nil, fmt.Errorf("%s: cannot reach PostgreSQL: %w", p, err)
	}
	p.conn = conn
	return conn, nil
}

// queryErr makes a query the server cannot run as written (class 42:
// syntax error, undefined table or column, no privilege) a ConfigError.
func (p *postgresProbe) queryErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "42") {
		return backend.Configf("%s: the effects query fails: %s (SQLSTATE %s)", p, pe.Message, pe.Code)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// Records runs the query once for the whole batch, $1 = the event IDs.
func (p *postgresProbe) Records(ctx context.Context, eventIDs []string) (map[string]Record, error) {
	ids := Batch(eventIDs)
	res := NewResults(ids)
	if len(ids) == 0 {
		return res.got, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	conn, err := p.connect(ctx)
	if err != nil {
		return nil, scrub(err, p.password)
	}
	if err := p.read(ctx, conn, ids, res); err != nil {
		return nil, scrub(p.queryErr(err), p.password)
	}
	return res.got, nil
}

func (p *postgresProbe) read(ctx context.Context, conn *pgx.Conn, ids []string, res *Results) error {
	rows, err := conn.Query(ctx, p.query, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	withStatus := len(rows.FieldDescriptions()) == 5
	for rows.Next() {
		var (
			id, fp, status *string
			attempts, eff  *int64
		)
		dest := []any{&id, &attempts, &eff, &fp}
		if withStatus {
			dest = append(dest, &status)
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if id == nil {
			return errors.New("a row has a NULL event_id")
		}
		rec := Record{EventID: *id, Attempts: deref(attempts), Effects: deref(eff), Fingerprint: deref(fp), Status: deref(status)}
		if err := res.Add(rec); err != nil {
			return err
		}
	}
	return rows.Err()
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (p *postgresProbe) String() string { return p.display }

func (p *postgresProbe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.conn.Close(ctx)
	p.conn = nil
	return err
}

// pgParseError is what pgx found wrong in a postgres:// URL, without the
// URL and the values in it. pgx's own text quotes the whole URL (its
// password masked, its other values not) and, after ": " or in
// parentheses, the value it could not use: a query value under a
// mistyped key may be a secret, so only pgx's description of what is
// wrong is kept ("invalid connect_timeout", "unknown
// target_session_attrs value").
func pgParseError(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "not a postgres URL pgx can read"
	}
	// The same error about no URL at all gives pgx's message alone.
	bare := *pe
	bare.ConnString = ""
	msg := strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
	if cause := errors.Unwrap(pe); cause != nil {
		msg = strings.TrimSuffix(msg, " ("+cause.Error()+")")
	}
	msg, _, _ = strings.Cut(msg, ": ")
	return msg
}
