package effects

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/dlqctl/dlqctl/backend"
)

// sqliteMaxVars is SQLite's default SQLITE_MAX_VARIABLE_NUMBER (since
// 3.32). Only a batch of more event IDs than that — far beyond any redrive
// batch — costs more than one query: one per 32766 IDs.
const sqliteMaxVars = 32766

// sqliteBusyTimeout lets a read wait out a consumer's write lock instead of
// failing with SQLITE_BUSY.
const sqliteBusyTimeout = 5 * time.Second

// sqliteProbe reads the consumer's table in a SQLite file, read-only.
type sqliteProbe struct {
	db      *sql.DB
	path    string // as given, for String
	table   string // quoted
	timeout time.Duration
}

// openSQLite opens path read-only. wrap, when not nil, interposes on the
// driver's connections (tests count queries with it).
func openSQLite(ctx context.Context, path string, opts Options, wrap func(driver.Connector) driver.Connector) (*sqliteProbe, error) {
	if path == "" {
		return nil, backend.Configf("effects sqlite: no path (want sqlite:PATH)")
	}
	table, err := identifier(opts.Table)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("effects sqlite:%s: %w", path, err)
	}
	switch fi, err := os.Stat(abs); {
	case errors.Is(err, fs.ErrNotExist):
		return nil, backend.Configf("effects sqlite:%s: no such file (the consumer's SQLite database)", path)
	case err != nil:
		return nil, fmt.Errorf("effects sqlite:%s: %w", path, err)
	case fi.IsDir():
		return nil, backend.Configf("effects sqlite:%s: is a directory, not a SQLite database", path)
	}
	// mode=ro: a probe never writes, and never creates a missing file.
	dsn := fmt.Sprintf("file:%s?mode=ro&_pragma=busy_timeout(%d)", sqliteURIPath(abs), sqliteBusyTimeout.Milliseconds())
	var conn driver.Connector
	if conn, err = sqlite.NewConnector(dsn); err != nil {
		return nil, fmt.Errorf("effects sqlite:%s: %w", path, err)
	}
	if wrap != nil {
		conn = wrap(conn)
	}
	p := &sqliteProbe{db: sql.OpenDB(conn), path: path, table: table, timeout: opts.Timeout}
	p.db.SetMaxOpenConns(1)
	if err := p.check(ctx); err != nil {
		_ = p.db.Close()
		return nil, err
	}
	return p, nil
}

// sqliteURIPath escapes what SQLite's URI parser would read as the end of
// the path or an escape; a Windows path gets the leading / of file:///C:/.
func sqliteURIPath(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// check opens the file and reads no row, so that a file that is no SQLite
// database, a missing table or a missing column fails Open, not the first
// batch after a redrive.
func (p *sqliteProbe) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	rows, err := p.db.QueryContext(ctx, "SELECT event_id, attempts, effects, fingerprint, status FROM "+p.table+" LIMIT 0")
	if err == nil {
		err = rows.Close()
	}
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, wrong := range []string{"no such table", "no such column", "not a database"} {
		if strings.Contains(msg, wrong) {
			return backend.Configf("%s: %v (want a table %s(event_id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, attempts INTEGER, effects INTEGER))", p, err, p.table)
		}
	}
	return fmt.Errorf("%s: %w", p, err)
}

// Records is one SELECT … WHERE event_id IN (…) per batch.
func (p *sqliteProbe) Records(ctx context.Context, eventIDs []string) (map[string]Record, error) {
	ids := Batch(eventIDs)
	res := NewResults(ids)
	if len(ids) == 0 {
		return res.got, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	for start := 0; start < len(ids); start += sqliteMaxVars {
		if err := p.query(ctx, ids[start:min(start+sqliteMaxVars, len(ids))], res); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return res.got, nil
}

func (p *sqliteProbe) query(ctx context.Context, ids []string, res *Results) error {
	q := "SELECT event_id, attempts, effects, fingerprint, status FROM " + p.table +
		" WHERE event_id IN (?" + strings.Repeat(",?", len(ids)-1) + ")"
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := p.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, fp, status sql.NullString
			attempts, eff  sql.NullInt64
		)
		if err := rows.Scan(&id, &attempts, &eff, &fp, &status); err != nil {
			return err
		}
		rec := Record{EventID: id.String, Attempts: attempts.Int64, Effects: eff.Int64, Fingerprint: fp.String, Status: status.String}
		if err := res.Add(rec); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (p *sqliteProbe) String() string { return "sqlite:" + p.path }

func (p *sqliteProbe) Close() error { return p.db.Close() }
