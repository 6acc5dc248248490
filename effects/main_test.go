package effects

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/pgtest"
)

// The real servers every test shares; each test works in a database or
// under key names of its own.
var (
	pg  *pgtest.Server
	seq atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if pg, err = pgtest.StartProcess(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	defer pg.Stop()
	return m.Run()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// consumerState is what a consumer recorded, the same in every store.
var consumerState = []Record{
	{EventID: "E1", Attempts: 1, Effects: 1, Fingerprint: "sha256:aaa", Status: "done"},                // applied
	{EventID: "E2", Attempts: 3, Effects: 1, Fingerprint: "sha256:bbb", Status: "done"},                // absorbed duplicate
	{EventID: "E3", Attempts: 2, Effects: 2, Fingerprint: "sha256:ccc", Status: "done"},                // duplicate effect
	{EventID: "E4", Attempts: 1, Effects: 1, Fingerprint: "sha256:other", Status: "done"},              // conflict
	{EventID: "E5", Attempts: 1, Effects: 0, Fingerprint: "sha256:eee", Status: "processing"},          // pending
	{EventID: "it's E7 ü", Attempts: 1, Effects: 1, Fingerprint: "sha256:fff", Status: "done"},         // quoting
	{EventID: "E8", Attempts: 2, Effects: 1, Fingerprint: "", Status: ""},                              // no fingerprint
	{EventID: "E9 with spaces", Attempts: 9, Effects: 1, Fingerprint: "sha256:999", Status: "retried"}, // spaces
}

// askedBatch holds every recorded event, an unknown one (E6) and a repeat.
var askedBatch = []string{"E1", "E2", "E3", "E4", "E5", "E6", "it's E7 ü", "E8", "E9 with spaces", "E1"}

func wantRecords(withStatus bool) map[string]Record {
	want := map[string]Record{}
	for _, r := range consumerState {
		if !withStatus {
			r.Status = ""
		}
		want[r.EventID] = r
	}
	return want
}

// bigBatch is 50 event IDs: the recorded ones and unknown ones.
func bigBatch() []string {
	ids := []string{}
	for _, r := range consumerState {
		ids = append(ids, r.EventID)
	}
	for i := len(ids); i < 50; i++ {
		ids = append(ids, fmt.Sprintf("unknown-%02d", i))
	}
	return ids
}

// --- loaders: one consumer state into each kind of store ---

func loadSQLite(t *testing.T, table string, state []Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "consumer.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE ` + table + `(event_id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, attempts INTEGER, effects INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for _, r := range state {
		if _, err := db.Exec(`INSERT INTO `+table+` VALUES (?, ?, ?, ?, ?)`, r.EventID, r.Fingerprint, r.Status, r.Attempts, r.Effects); err != nil {
			t.Fatal(err)
		}
	}
	return "sqlite:" + path
}

// newDatabase creates a database of the test's own and returns its name.
func newDatabase(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d", seq.Add(1))
	if err := pg.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	return name
}

func loadPostgres(t *testing.T, state []Record) string {
	t.Helper()
	db := newDatabase(t)
	if err := pg.ExecIn(db, `CREATE TABLE inbox(event_id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, attempts INTEGER, effects INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for _, r := range state {
		if err := pg.ExecIn(db, `INSERT INTO inbox VALUES ($1, $2, $3, $4, $5)`, r.EventID, r.Fingerprint, r.Status, r.Attempts, r.Effects); err != nil {
			t.Fatal(err)
		}
	}
	return pg.URL(db)
}

// loadExec writes a consumer-side script that answers from state and
// appends a line to counter on every run.
func loadExec(t *testing.T, state []Record) (rawURL, counter string) {
	t.Helper()
	dir := t.TempDir()
	counter = filepath.Join(dir, "runs")
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\necho run >> %s\nwhile IFS= read -r id; do\n  case \"$id\" in\n", shellQuote(counter))
	for _, r := range state {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		// stdin is one event ID a line
		fmt.Fprintf(&b, "    %s) printf '%%s\\n' %s ;;\n", shellQuote(r.EventID), shellQuote(string(line)))
	}
	b.WriteString("  esac\ndone\n")
	script := filepath.Join(dir, "effects.sh")
	if err := os.WriteFile(script, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return "exec:" + script, counter
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func runs(t *testing.T, counter string) int {
	t.Helper()
	b, err := os.ReadFile(counter)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// consumerServer is a consumer's effects endpoint over HTTP that answers
// from state and counts requests.
type consumerServer struct {
	*httptest.Server
	requests atomic.Int64
	token    string // wanted bearer token, if any
}

func loadHTTP(t *testing.T, state []Record, token string) *consumerServer {
	t.Helper()
	byID := map[string]Record{}
	for _, r := range state {
		byID[r.EventID] = r
	}
	cs := &consumerServer{token: token}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.requests.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want POST application/json", http.StatusBadRequest)
			return
		}
		if cs.token != "" && r.Header.Get("Authorization") != "Bearer "+cs.token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		var req struct {
			EventIDs []string `json:"event_ids"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		results := []Record{}
		for _, id := range req.EventIDs {
			if rec, ok := byID[id]; ok {
				results = append(results, rec)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	t.Cleanup(cs.Close)
	return cs
}

// --- counters of round trips ---

// countingConnector counts the queries SQLite runs on its connections.
type countingConnector struct {
	driver.Connector
	queries *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, queries: c.queries}, nil
}

type countingConn struct {
	driver.Conn
	queries *atomic.Int64
}

func (c *countingConn) Unwrap() driver.Conn { return c.Conn }

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.queries.Add(1)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.queries.Add(1)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

// wireCounter is a TCP proxy in front of PostgreSQL that counts the
// server's ReadyForQuery ('Z') messages: the server sends one at the end of
// every round trip (a simple query, or an extended-protocol Sync).
type wireCounter struct {
	ln     net.Listener
	target string
	ready  atomic.Int64
	wg     sync.WaitGroup
}

func newWireCounter(t *testing.T, target string) *wireCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireCounter{ln: ln, target: target}
	w.wg.Add(1)
	go w.serve()
	t.Cleanup(func() {
		ln.Close()
		w.wg.Wait()
	})
	return w
}

func (w *wireCounter) serve() {
	defer w.wg.Done()
	for {
		client, err := w.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", w.target)
		if err != nil {
			client.Close()
			continue
		}
		go func() {
			_, _ = io.Copy(server, client)
			server.Close()
		}()
		go func() {
			w.countReady(client, server)
			client.Close()
		}()
	}
}

// countReady copies the server's messages (type byte, int32 length that
// counts itself, body) to the client. With sslmode=disable the stream is
// typed messages from its first byte.
func (w *wireCounter) countReady(client io.Writer, server io.Reader) {
	head := make([]byte, 5)
	for {
		if _, err := io.ReadFull(server, head); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if head[0] == 'Z' {
			w.ready.Add(1)
		}
		if _, err := client.Write(append(head, body...)); err != nil {
			return
		}
	}
}
