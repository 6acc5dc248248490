package effects

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects/effectstest"
)

func open(t *testing.T, rawURL string, opts Options) Probe {
	t.Helper()
	p, err := Stores{}.Open(testCtx(t), rawURL, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", rawURL, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// Each kind of store returns the same records for the same consumer
// state (SPEC §6); effects/rediseffects checks the Redis store's against
// the same state.
func TestEveryKindReturnsTheSameRecords(t *testing.T) {
	execURL, _ := loadExec(t, consumerState)
	kinds := []struct {
		name       string
		url        string
		withStatus bool
	}{
		{"sqlite", loadSQLite(t, "inbox", consumerState), true},
		{"postgres", loadPostgres(t, consumerState), true},
		{"exec", execURL, true},
		{"http", loadHTTP(t, consumerState, "").URL + "/effects", true},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			p := open(t, k.url, Options{})
			got, err := p.Records(testCtx(t), askedBatch)
			if err != nil {
				t.Fatal(err)
			}
			if want := wantRecords(k.withStatus); !maps.Equal(got, want) {
				t.Errorf("records differ:\n got %v\nwant %v", got, want)
			}
			if _, ok := got["E6"]; ok {
				t.Error("E6, which the consumer never saw, is in the map")
			}
			empty, err := p.Records(testCtx(t), nil)
			if err != nil || len(empty) != 0 {
				t.Errorf("empty batch: %v, %v", empty, err)
			}
		})
	}
}

// A batch of 50 event IDs costs one round trip on every kind of store,
// the first batch included.
func TestOneRoundTripPerBatch(t *testing.T) {
	ids := bigBatch()
	check := func(t *testing.T, got map[string]Record, err error, withStatus bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if want := wantRecords(withStatus); !maps.Equal(got, want) {
			t.Errorf("records differ:\n got %v\nwant %v", got, want)
		}
	}

	t.Run("sqlite", func(t *testing.T) {
		path := strings.TrimPrefix(loadSQLite(t, "inbox", consumerState), "sqlite:")
		var queries atomic.Int64
		p, err := openSQLite(testCtx(t), path, Options{Timeout: DefaultTimeout}, func(c driver.Connector) driver.Connector {
			return countingConnector{Connector: c, queries: &queries}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for batch := range 2 {
			before := queries.Load()
			got, err := p.Records(testCtx(t), ids)
			check(t, got, err, true)
			if n := queries.Load() - before; n != 1 {
				t.Errorf("batch %d: %d queries for 50 event IDs, want 1", batch, n)
			}
		}
	})

	t.Run("postgres", func(t *testing.T) {
		raw := loadPostgres(t, consumerState)
		wire := newWireCounter(t, pg.Addr())
		p := open(t, strings.Replace(raw, pg.Addr(), wire.ln.Addr().String(), 1), Options{})
		for batch := range 2 {
			before := wire.ready.Load()
			got, err := p.Records(testCtx(t), ids)
			check(t, got, err, true)
			if n := wire.ready.Load() - before; n != 1 {
				t.Errorf("batch %d: %d round trips (ReadyForQuery) for 50 event IDs, want 1", batch, n)
			}
		}
	})

	t.Run("exec", func(t *testing.T) {
		raw, counter := loadExec(t, consumerState)
		p := open(t, raw, Options{})
		got, err := p.Records(testCtx(t), ids)
		check(t, got, err, true)
		if n := runs(t, counter); n != 1 {
			t.Errorf("the command ran %d times for 50 event IDs, want 1", n)
		}
	})

	t.Run("http", func(t *testing.T) {
		cs := loadHTTP(t, consumerState, "s3cret-token")
		p := open(t, cs.URL, Options{Token: "s3cret-token"})
		got, err := p.Records(testCtx(t), ids)
		check(t, got, err, true)
		if n := cs.requests.Load(); n != 1 {
			t.Errorf("%d requests for 50 event IDs, want 1", n)
		}
	})
}

// --effects-query reads a consumer's own table and column names; NULLs
// read as 0 and "".
func TestPostgresEffectsQuery(t *testing.T) {
	db := newDatabase(t)
	err := pg.ExecIn(db, `
		CREATE SCHEMA consumer;
		CREATE TABLE consumer.processed(msg_id text PRIMARY KEY, deliveries int, side_effects bigint, payload_hash text);
		INSERT INTO consumer.processed VALUES
			('E1', 1, 1, 'sha256:aaa'),
			('E2', 3, 1, 'sha256:bbb'),
			('E5', 1, NULL, NULL),
			('other', 7, 7, 'x');`)
	if err != nil {
		t.Fatal(err)
	}
	query := `SELECT msg_id, deliveries, side_effects, payload_hash FROM consumer.processed WHERE msg_id = ANY($1)`
	p := open(t, pg.URL(db), Options{Query: query})
	got, err := p.Records(testCtx(t), []string{"E1", "E2", "E5", "E6"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Record{
		"E1": {EventID: "E1", Attempts: 1, Effects: 1, Fingerprint: "sha256:aaa"},
		"E2": {EventID: "E2", Attempts: 3, Effects: 1, Fingerprint: "sha256:bbb"},
		"E5": {EventID: "E5", Attempts: 1},
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}

	for name, q := range map[string]string{
		"three columns": `SELECT msg_id, deliveries, side_effects FROM consumer.processed WHERE msg_id = ANY($1)`,
		"syntax error":  `SELEC msg_id FROM consumer.processed WHERE msg_id = ANY($1)`,
		"unknown table": `SELECT msg_id, deliveries, side_effects, payload_hash FROM nope WHERE msg_id = ANY($1)`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Stores{}.Open(testCtx(t), pg.URL(db), Options{Query: q})
			var ce *backend.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want a *backend.ConfigError", err, err)
			}
		})
	}
}

// Options.Table names another table, in sqlite and in postgres.
func TestTableOption(t *testing.T) {
	sqliteURL := loadSQLite(t, "consumer_inbox", consumerState)
	db := newDatabase(t)
	if err := pg.ExecIn(db, `CREATE SCHEMA app; CREATE TABLE app.consumer_inbox(event_id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, attempts INTEGER, effects INTEGER);
		INSERT INTO app.consumer_inbox VALUES ('E1', 'sha256:aaa', 'done', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ url, table string }{{sqliteURL, "consumer_inbox"}, {pg.URL(db), "app.consumer_inbox"}} {
		p := open(t, c.url, Options{Table: c.table})
		got, err := p.Records(testCtx(t), []string{"E1"})
		if err != nil {
			t.Fatal(err)
		}
		if got["E1"] != wantRecords(true)["E1"] {
			t.Errorf("%s: got %v", p, got)
		}
	}
}

// URLs and options that are wrong as written are *backend.ConfigError,
// and no message carries the password.
func TestConfigErrors(t *testing.T) {
	const pw = "s3cretPW"
	sqliteURL := loadSQLite(t, "inbox", consumerState)
	noTable := loadSQLite(t, "elsewhere", consumerState)
	db := newDatabase(t)
	cases := []struct {
		name, url string
		opts      Options
		want      string
	}{
		{"empty", "", Options{}, "no scheme"},
		{"no scheme", "inbox.db", Options{}, "supported: sqlite:PATH"},
		{"unknown scheme", "mysql://u:" + pw + "@h/db", Options{}, `unknown scheme "mysql"`},
		{"sqlite without path", "sqlite:", Options{}, "no path"},
		{"sqlite missing file", "sqlite:" + filepath.Join(t.TempDir(), "nope.db"), Options{}, "no such file"},
		{"sqlite missing table", noTable, Options{}, "no such table"},
		{"sqlite not a database", "sqlite:" + writeFile(t, "junk.db", "this is not sqlite, it is a long enough text file to have a header"), Options{}, "not a database"},
		{"sqlite bad table name", sqliteURL, Options{Table: `inbox"; DROP TABLE inbox; --`}, "plain identifier"},
		{"query on sqlite", sqliteURL, Options{Query: "SELECT 1"}, "needs a postgres"},
		{"table on redis", "redis://localhost/0?attempts=a&effects=b", Options{Table: "inbox"}, "needs a sqlite"},
		{"negative timeout", sqliteURL, Options{Timeout: -time.Second}, "timeout"},
		{"exec without command", "exec:  ", Options{}, "no command"},
		{"redis without its store", "redis://:" + pw + "@localhost:6379/0?attempts=a&effects=b", Options{}, "no Redis effects store"},
		{"postgres unparsable", "postgres://u:" + pw + "@[::1/db", Options{}, "not a valid URL"},
		{"postgres bad port", "postgres://u:" + pw + "@localhost:port/db", Options{}, "not a valid URL"},
		{"postgres bad table", pg.URL(db), Options{Table: "1nbox"}, "plain identifier"},
		{"postgres query and table", pg.URL(db), Options{Query: "SELECT 1", Table: "inbox"}, "not both"},
		{"postgres missing table", pg.URL(db), Options{}, `relation "inbox" does not exist`},
		{"postgres missing database", strings.Replace(pg.URL("nope"), "postgres@", "postgres:"+pw+"@", 1), Options{}, `database "nope" does not exist`},
		{"http without host", "http:///effects", Options{}, "no host"},
		{"https unparsable", "https://u:" + pw + "@[::1/effects", Options{}, "not a valid URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Stores{}.Open(testCtx(t), c.url, c.opts)
			if err == nil {
				p.Close()
				t.Fatalf("Open(%q) succeeded", c.url)
			}
			effectstest.ConfigError(t, err, pw, c.want)
		})
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A store that cannot be reached is an error (exit 1), not a ConfigError,
// and it does not carry the password.
func TestConnectionRefused(t *testing.T) {
	const pw = "s3cretPW"
	addr := closedAddr(t)
	_, err := Stores{}.Open(testCtx(t), "postgres://app:"+pw+"@"+addr+"/db?sslmode=disable", Options{Timeout: 5 * time.Second})
	effectstest.PlainError(t, err, pw, "refused")
	// An http probe connects on its first batch.
	p := open(t, "http://app:"+pw+"@"+addr+"/effects", Options{Token: "tok3n-value"})
	_, err = p.Records(testCtx(t), []string{"E1"})
	effectstest.PlainError(t, err, pw, "refused")
	if strings.Contains(err.Error(), "tok3n-value") {
		t.Errorf("err = %q carries the token", err)
	}
}

// A real authentication failure, with the password in the URL or in
// Options.Password, names neither.
func TestWrongPassword(t *testing.T) {
	const right, wrong = "r1ghtPassw0rd", "wr0ngPassw0rd"
	if err := pg.Exec(`DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgtest_password') THEN
			CREATE ROLE pgtest_password LOGIN PASSWORD '` + right + `';
		END IF; END $$`); err != nil {
		t.Fatal(err)
	}
	db := loadPostgres(t, consumerState)
	dbName := db[strings.LastIndex(db, "/")+1 : strings.Index(db, "?")]
	if err := pg.ExecIn(dbName, "GRANT SELECT ON inbox TO pgtest_password"); err != nil {
		t.Fatal(err)
	}
	base := "postgres://pgtest_password%s@" + pg.Addr() + "/" + dbName + "?sslmode=disable"

	_, err := Stores{}.Open(testCtx(t), fmt.Sprintf(base, ":"+wrong), Options{})
	effectstest.PlainError(t, err, wrong, "authentication failed")
	_, err = Stores{}.Open(testCtx(t), fmt.Sprintf(base, ""), Options{Password: wrong})
	effectstest.PlainError(t, err, wrong, "authentication failed")

	p := open(t, fmt.Sprintf(base, ""), Options{Password: right})
	if got, err := p.Records(testCtx(t), []string{"E1"}); err != nil || len(got) != 1 {
		t.Errorf("with the right password: %v, %v", got, err)
	}
	p = open(t, fmt.Sprintf(base, ":"+right), Options{Password: wrong})
	if want := "postgres://pgtest_password:xxxxx@" + pg.Addr() + "/" + dbName + "?sslmode=disable"; p.String() != want {
		t.Errorf("String() = %q, want %q", p.String(), want)
	}
}

// String names every probe without its password or token.
func TestStringHidesPasswords(t *testing.T) {
	const pw = "s3cretPW"
	raw := loadPostgres(t, consumerState)
	pgWithPW := strings.Replace(raw, "postgres@", "postgres:"+pw+"@", 1)
	cs := loadHTTP(t, consumerState, "")
	httpAddr := strings.TrimPrefix(cs.URL, "http://")
	cases := []struct{ url, want string }{
		{pgWithPW, "postgres://postgres:xxxxx@" + pg.Addr() + "/"},
		{strings.Replace(raw, "?", "?password="+pw+"&", 1), "password=xxxxx"},
		{"http://app:" + pw + "@" + httpAddr + "/effects?token=" + pw, "http://app:xxxxx@" + httpAddr + "/effects?token=xxxxx"},
		{"exec:psql postgres://app:" + pw + "@db/app -At -f probe.sql", "exec:psql postgres://app:xxxxx@db/app -At -f probe.sql"},
	}
	for _, c := range cases {
		p := open(t, c.url, Options{})
		if s := p.String(); !strings.Contains(s, c.want) || strings.Contains(s, pw) {
			t.Errorf("String() = %q, want it to hold %q and no password", s, c.want)
		}
	}
}

// TestURLErrorsShowNoQueryValue: an effects URL refused for its query,
// or one whose probe cannot connect, is refused with an error that names
// the key and shows none of the query's values: a value under a mistyped
// key (passwrod=) may be a secret. pgx's own parse errors quote the URL
// and the value they refuse.
func TestURLErrorsShowNoQueryValue(t *testing.T) {
	const mark = "Q7xZsecret"
	for _, raw := range []string{
		"postgres://u@127.0.0.1:1/db?connect_timeout=" + mark,
		"postgres://u@127.0.0.1:1/db?target_session_attrs=" + mark,
		"postgres://u@127.0.0.1:1/db?sslmode=" + mark,
		"postgres://u@127.0.0.1:1/db?min_protocol_version=" + mark,
		"postgres://u@127.0.0.1:1/db?passwrod=" + mark,
		"http://127.0.0.1:1/effects?api_kee=" + mark,
	} {
		p, err := Stores{}.Open(testCtx(t), raw, Options{Timeout: 5 * time.Second})
		if err == nil {
			// An http probe connects on its first batch.
			_, err = p.Records(testCtx(t), []string{"E1"})
			p.Close()
		}
		if err == nil || strings.Contains(err.Error(), mark) {
			t.Errorf("%s: %v; want an error without %s", raw, err, mark)
		}
	}
}

func TestSQLiteIsReadOnly(t *testing.T) {
	raw := loadSQLite(t, "inbox", consumerState)
	p := open(t, raw, Options{})
	_, err := p.(*sqliteProbe).db.ExecContext(testCtx(t), "DELETE FROM inbox")
	if err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("a write through the probe: %v, want a read-only error", err)
	}
}

func TestExecErrors(t *testing.T) {
	ctx := testCtx(t)
	t.Run("non-zero exit", func(t *testing.T) {
		p := open(t, `exec:echo "cannot reach the inbox db" >&2; exit 3`, Options{})
		_, err := p.Records(ctx, []string{"E1"})
		if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "cannot reach the inbox db") {
			t.Errorf("err = %v, want the exit status and the command's stderr", err)
		}
	})
	t.Run("long stderr is truncated", func(t *testing.T) {
		p := open(t, `exec:head -c 100000 /dev/zero | tr '\0' x >&2; exit 1`, Options{})
		_, err := p.Records(ctx, []string{"E1"})
		if err == nil || len(err.Error()) > 3000 || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("err (%d bytes) = %.200v…, want a truncated stderr", len(fmt.Sprint(err)), err)
		}
	})
	t.Run("bad line", func(t *testing.T) {
		p := open(t, `exec:echo '{"event_id":"E1","attempts":1,"effects":1}'; echo 'E2 attempts=3'; echo oops >&2`, Options{})
		_, err := p.Records(ctx, []string{"E1", "E2"})
		if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "E2 attempts=3") || !strings.Contains(err.Error(), "oops") {
			t.Errorf("err = %v, want the line, its number and stderr", err)
		}
	})
	t.Run("one event twice", func(t *testing.T) {
		p := open(t, `exec:echo '{"event_id":"E1","effects":1}'; echo '{"event_id":"E1","effects":2}'`, Options{})
		if _, err := p.Records(ctx, []string{"E1"}); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("reads stdin", func(t *testing.T) {
		p := open(t, `exec:while read -r id; do printf '{"event_id":"%s","attempts":2,"effects":1}\n' "$id"; done`, Options{})
		got, err := p.Records(ctx, []string{"A", "B"})
		if err != nil || len(got) != 2 || got["B"].Attempts != 2 {
			t.Errorf("got %v, %v", got, err)
		}
	})
	t.Run("cancel kills it", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		p := open(t, "exec:sleep 30 & echo $! > "+pidFile+"; wait", Options{})
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := p.Records(ctx, []string{"E1"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's deadline", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Records returned after %s", d)
		}
		pid, _ := os.ReadFile(pidFile)
		if alive(strings.TrimSpace(string(pid))) {
			t.Errorf("the command's child (sleep, pid %s) outlived the cancel", pid)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		p := open(t, "exec:sleep 30", Options{Timeout: 200 * time.Millisecond})
		if _, err := p.Records(ctx, []string{"E1"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the timeout", err)
		}
	})
	t.Run("line break in an event ID, one a line", func(t *testing.T) {
		// One-a-line input cannot carry it: the batch fails, naming the
		// NDJSON framing, instead of the ID arriving as two.
		p := open(t, "exec:cat", Options{})
		_, err := p.Records(ctx, []string{"E1\nE2", "E3"})
		if err == nil || !strings.Contains(err.Error(), "exec+ndjson:") {
			t.Fatalf("err = %v, want a refusal naming exec+ndjson:", err)
		}
	})
	t.Run("stdin is one ID a line", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "in")
		p := open(t, "exec:cat > "+out, Options{})
		if _, err := p.Records(ctx, []string{"E1", `q"uote`}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(out); string(b) != "E1\nq\"uote\n" {
			t.Errorf("stdin = %q", b)
		}
	})
	t.Run("line break in an event ID, NDJSON", func(t *testing.T) {
		// NDJSON both ways: the ID travels as a JSON string, and the
		// command's echo of it comes back as the same ID.
		p := open(t, "exec+ndjson:cat", Options{})
		got, err := p.Records(ctx, []string{"E1\nE2", "E3"})
		if err != nil || len(got) != 2 {
			t.Fatalf("got %v, %v; want both IDs back", got, err)
		}
		if _, ok := got["E1\nE2"]; !ok {
			t.Errorf("the ID with a line break did not come back whole: %v", got)
		}
	})
	t.Run("stdin is NDJSON with exec+ndjson:", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "in")
		p := open(t, "exec+ndjson:cat > "+out, Options{})
		if _, err := p.Records(ctx, []string{"E1", `q"uote`}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		if string(b) != "{\"event_id\":\"E1\"}\n{\"event_id\":\"q\\\"uote\"}\n" {
			t.Errorf("stdin = %q", b)
		}
	})
	t.Run("stdout is bounded", func(t *testing.T) {
		p := open(t, `exec:yes '{"event_id":"E1","attempts":1,"effects":1}'`, Options{})
		_, err := p.Records(ctx, []string{"E1"})
		if err == nil || !strings.Contains(err.Error(), "stdout over 64 MiB") {
			t.Errorf("err = %v, want the stdout bound", err)
		}
	})
	t.Run("scrubbed environment", func(t *testing.T) {
		env := []string{"PATH=" + os.Getenv("PATH"), "DLQCTL_APPROVAL_KEY=k-secret", "DLQCTL_REDIS_PASSWORD=r-secret",
			"DLQCTL_PULSAR_TOKEN=p-secret", "DLQCTL_KAFKA_PASSWORD=kf-secret", "AWS_SECRET_ACCESS_KEY=a-secret",
			"AWS_SESSION_TOKEN=s-secret", "DLQCTL_EFFECTS_PASSWORD=e-secret", "INBOX_DB=/var/inbox.db", "DLQCTL_OUTPUT=json"}
		out := filepath.Join(t.TempDir(), "env")
		p := open(t, "exec:env > "+out, Options{Environ: func() []string { return env }})
		if _, err := p.Records(ctx, []string{"E1"}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		if strings.Contains(string(b), "-secret") {
			t.Errorf("a secret reached the command's environment:\n%s", b)
		}
		if !strings.Contains(string(b), "INBOX_DB=/var/inbox.db") || !strings.Contains(string(b), "DLQCTL_OUTPUT=json") {
			t.Errorf("ordinary variables were taken out too:\n%s", b)
		}
	})
	t.Run("stderr is sanitized", func(t *testing.T) {
		p := open(t, `exec:printf 'boom \033]0;pwned\007\033[2J\033[31mred\n' >&2; exit 1`, Options{})
		_, err := p.Records(ctx, []string{"E1"})
		if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") || !strings.Contains(err.Error(), "boom") {
			t.Errorf("err = %q, want the stderr without escape sequences", err)
		}
	})
}

func alive(pid string) bool {
	if pid == "" {
		return false
	}
	// A killed child may linger as a zombie until its parent is reaped;
	// give it a moment, and count a zombie as dead.
	for range 50 {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func TestHTTPErrors(t *testing.T) {
	ctx := testCtx(t)
	const token = "t0ken-s3cret"
	t.Run("500", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A careless server echoes the request's headers.
			http.Error(w, "inbox db down; request had "+r.Header.Get("Authorization")+strings.Repeat(" padding", 200), http.StatusInternalServerError)
		}))
		defer srv.Close()
		p := open(t, srv.URL, Options{Token: token})
		_, err := p.Records(ctx, []string{"E1"})
		if err == nil || !strings.Contains(err.Error(), "500 Internal Server Error") || !strings.Contains(err.Error(), "inbox db down") || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("err = %v, want the status and the start of the body", err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("err = %q carries the token", err)
		}
	})
	t.Run("401 without the token", func(t *testing.T) {
		cs := loadHTTP(t, consumerState, token)
		p := open(t, cs.URL, Options{})
		if _, err := p.Records(ctx, []string{"E1"}); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("err = %v", err)
		}
	})
	for name, body := range map[string]string{
		"not json":         "<html>oops</html>",
		"no results":       `{"records":[]}`,
		"no event_id":      `{"results":[{"attempts":1}]}`,
		"one event twice":  `{"results":[{"event_id":"E1","effects":1},{"event_id":"E1","effects":2}]}`,
		"attempts as text": `{"results":[{"event_id":"E1","attempts":"one"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, body)
			}))
			defer srv.Close()
			p := open(t, srv.URL, Options{})
			if _, err := p.Records(ctx, []string{"E1"}); err == nil {
				t.Error("no error")
			}
		})
	}
}

// A postgres probe reconnects on the next batch after the server closed
// its connection.
func TestPostgresReconnects(t *testing.T) {
	raw := loadPostgres(t, consumerState)
	p := open(t, raw+"&application_name=dlqctl_probe_reconnect", Options{})
	ctx := testCtx(t)
	if _, err := p.Records(ctx, []string{"E1"}); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dlqctl_probe_reconnect'`); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 2 { // the first batch may meet the dead connection
		if _, err = p.Records(ctx, []string{"E1"}); err == nil {
			break
		}
	}
	if err != nil {
		t.Errorf("after the server closed the connection: %v", err)
	}
}
