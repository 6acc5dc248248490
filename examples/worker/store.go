package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Outcomes of processing one delivery, as logged and counted.
const (
	outcomeApplied  = "applied"  // the effect was produced now
	outcomeAbsorbed = "absorbed" // a duplicate: the effect was already there
	outcomeConflict = "conflict" // same event_id, another fingerprint: never applied
	outcomeFailed   = "failed"   // processing failed: to be dead-lettered
)

// Inbox statuses (the inbox table's status column).
const (
	statusDone     = "done"
	statusFailed   = "failed"
	statusConflict = "conflict"
	// statusProcessing is only ever seen inside the transaction that
	// inserted the row.
	statusProcessing = "processing"
)

// Delivery is one delivered message as the store sees it, with the faults
// the tests inject into it.
type Delivery struct {
	EventID     string
	Fingerprint string

	Fail             bool // processing raises an error
	DoubleEffect     bool // the effect is applied twice
	CrashAfterCommit bool // the caller exits after commit, the first time
}

// Result is the inbox row after the transaction, and what happened.
type Result struct {
	Outcome  string
	Attempts int64
	Effects  int64
	// StoredFingerprint is the inbox's fingerprint: on a conflict, the
	// one first processed, which differs from the delivery's.
	StoredFingerprint string
	// Crash: the caller must exit now, before the ack
	// (--crash-after-commit, first delivery only).
	Crash bool
}

// Store is the consumer's database: the inbox table and the business
// effect, changed together in one transaction per delivery.
type Store interface {
	// Process records the delivery and applies its effect in one
	// transaction, and returns once it has committed. Only then may the
	// message be acked.
	Process(ctx context.Context, d Delivery, now time.Time) (Result, error)
	Close() error
}

// openStore opens sqlite:PATH or postgres://… and creates the tables that
// are missing. faults adds the table that remembers injected crashes.
func openStore(ctx context.Context, rawURL string, faults bool) (Store, error) {
	switch {
	case strings.HasPrefix(rawURL, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(rawURL, "sqlite:"), faults)
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		return openPostgres(ctx, rawURL, faults)
	}
	return nil, usagef("--inbox %q: want sqlite:PATH or postgres://…", rawURL)
}

// The statements of the processing transaction. $N placeholders work in
// both databases (SQLite reads $1 as parameter 1).
const (
	// upsertSQL is the inbox's unique key at work: a first delivery inserts
	// the row, any later one counts one more attempt. In PostgreSQL the
	// conflicting INSERT locks the row, so two workers that receive the
	// same event at once are serialized here and the second sees the
	// first's effect; SQLite's BEGIN IMMEDIATE serializes whole
	// transactions.
	upsertSQL = `INSERT INTO inbox (event_id, fingerprint, status, attempts, effects)
VALUES ($1, $2, '` + statusProcessing + `', 1, 0)
ON CONFLICT (event_id) DO UPDATE SET attempts = inbox.attempts + 1
RETURNING fingerprint, status, attempts, effects`
	updateSQL    = `UPDATE inbox SET status = $2, effects = $3 WHERE event_id = $1`
	effectSQL    = `INSERT INTO effects_log (event_id, applied_at) VALUES ($1, $2)`
	faultOnceSQL = `INSERT INTO worker_faults (event_id, fault) VALUES ($1, $2) ON CONFLICT DO NOTHING`
)

// faultsTableSQL remembers which injected faults already happened; it
// exists only when a worker was started with one.
const faultsTableSQL = `CREATE TABLE IF NOT EXISTS worker_faults (
  event_id TEXT NOT NULL,
  fault    TEXT NOT NULL,
  PRIMARY KEY (event_id, fault)
)`

// inboxTableSQL is the table dlqctl's --effects probes read (the reconciliation contract, docs/consumer-contract.md).
const inboxTableSQL = `CREATE TABLE IF NOT EXISTS inbox (
  event_id    TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  status      TEXT NOT NULL,
  attempts    INTEGER NOT NULL,
  effects     INTEGER NOT NULL
)`

// txn is what the processing transaction needs of either database.
type txn interface {
	exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	queryRow(ctx context.Context, query string, args ...any) interface{ Scan(...any) error }
}

// process is the one transaction, the same for every database:
//
//  1. upsert the inbox row: attempts counts every delivery;
//  2. another fingerprint for a known event_id is a conflict: recorded,
//     never applied;
//  3. an event whose effect exists is a duplicate: absorbed, no effect;
//  4. else the effect is applied (here: an effects_log row) and counted.
//
// A failure (--fail) is recorded as status failed with no effect and
// committed, so the attempt stays counted when the event is dead-lettered.
func process(ctx context.Context, tx txn, d Delivery, now time.Time) (Result, error) {
	var r Result
	var status string
	if err := tx.queryRow(ctx, upsertSQL, d.EventID, d.Fingerprint).Scan(&r.StoredFingerprint, &status, &r.Attempts, &r.Effects); err != nil {
		return r, fmt.Errorf("inbox upsert: %w", err)
	}
	switch {
	case !strings.EqualFold(r.StoredFingerprint, d.Fingerprint):
		r.Outcome, status = outcomeConflict, statusConflict
	case r.Effects >= 1:
		// The status stays as it was: done, or conflict if another
		// payload was seen meanwhile.
		r.Outcome = outcomeAbsorbed
	case d.Fail:
		r.Outcome, status = outcomeFailed, statusFailed
	default:
		n := 1
		if d.DoubleEffect {
			n = 2
		}
		for range n {
			if _, err := tx.exec(ctx, effectSQL, d.EventID, now.UTC().Format(time.RFC3339Nano)); err != nil {
				return r, fmt.Errorf("apply effect: %w", err)
			}
		}
		r.Effects += int64(n)
		r.Outcome, status = outcomeApplied, statusDone
	}
	if r.Outcome != outcomeAbsorbed {
		if _, err := tx.exec(ctx, updateSQL, d.EventID, status, r.Effects); err != nil {
			return r, fmt.Errorf("inbox update: %w", err)
		}
	}
	if d.CrashAfterCommit {
		// Committed with the rest: the redelivery after the crash finds
		// the marker and is processed normally.
		n, err := tx.exec(ctx, faultOnceSQL, d.EventID, "crash-after-commit")
		if err != nil {
			return r, fmt.Errorf("fault marker: %w", err)
		}
		r.Crash = n == 1
	}
	return r, nil
}

// sqliteURIPath escapes what SQLite's URI parser would read as the end of
// the path or an escape.
func sqliteURIPath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(p))
}

// sqliteStore is the inbox in a SQLite file.
type sqliteStore struct{ db *sql.DB }

func openSQLite(ctx context.Context, path string, faults bool) (*sqliteStore, error) {
	if path == "" {
		return nil, usagef("--inbox sqlite: needs a path (sqlite:PATH)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// _txlock=immediate: every transaction takes the write lock at BEGIN,
	// so two workers never both read the old row and then both write.
	// busy_timeout lets a writer wait for the other, and for dlqctl's
	// reads, instead of failing with SQLITE_BUSY.
	dsn := "file:" + sqliteURIPath(abs) + "?_txlock=immediate&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite:%s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	ddl := []string{inboxTableSQL, `CREATE TABLE IF NOT EXISTS effects_log (
  id         INTEGER PRIMARY KEY,
  event_id   TEXT NOT NULL,
  applied_at TEXT NOT NULL
)`}
	if faults {
		ddl = append(ddl, faultsTableSQL)
	}
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite:%s: create tables: %w", path, err)
		}
	}
	return &sqliteStore{db: db}, nil
}

func (s *sqliteStore) Process(ctx context.Context, d Delivery, now time.Time) (Result, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Result{}, err
	}
	defer tx.Rollback() // after Commit, a no-op
	r, err := process(ctx, sqlTxn{tx}, d, now)
	if err != nil {
		return r, err
	}
	return r, tx.Commit()
}

func (s *sqliteStore) Close() error { return s.db.Close() }

type sqlTxn struct{ tx *sql.Tx }

func (t sqlTxn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlTxn) queryRow(ctx context.Context, query string, args ...any) interface{ Scan(...any) error } {
	return t.tx.QueryRowContext(ctx, query, args...)
}

// pgStore is the inbox in PostgreSQL, on one connection: the worker
// processes one message at a time.
type pgStore struct{ conn *pgx.Conn }

// pgSchemaLock is the advisory lock key under which workers create the
// tables, so that two starting at once do not race on CREATE TABLE.
const pgSchemaLock = 0x646c71 // "dlq"

func openPostgres(ctx context.Context, rawURL string, faults bool) (*pgStore, error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, usagef("--inbox: %v", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres %s:%d/%s: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	s := &pgStore{conn: conn}
	ddl := []string{inboxTableSQL, `CREATE TABLE IF NOT EXISTS effects_log (
  id         BIGSERIAL PRIMARY KEY,
  event_id   TEXT NOT NULL,
  applied_at TEXT NOT NULL
)`}
	if faults {
		ddl = append(ddl, faultsTableSQL)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(pgSchemaLock)); err != nil {
			return err
		}
		for _, q := range ddl {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("postgres: create tables: %w", err)
	}
	return s, nil
}

func (s *pgStore) Process(ctx context.Context, d Delivery, now time.Time) (Result, error) {
	var r Result
	err := pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		var err error
		r, err = process(ctx, pgTxn{tx}, d, now)
		return err
	})
	return r, err
}

func (s *pgStore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.conn.Close(ctx)
}

type pgTxn struct{ tx pgx.Tx }

func (t pgTxn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (t pgTxn) queryRow(ctx context.Context, query string, args ...any) interface{ Scan(...any) error } {
	return t.tx.QueryRow(ctx, query, args...)
}
