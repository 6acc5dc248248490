package rediseffects

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/effects/effectstest"
)

// rds is the real server every test shares; each test keeps its hashes
// under key names of its own.
var (
	rds *redistest.Server
	seq atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if rds, err = redistest.StartProcess(); err != nil {
		fmt.Fprintln(os.Stderr, "redistest:", err)
		return 1
	}
	defer rds.Stop()
	return m.Run()
}

// stores opens effects URLs with this package plugged in, as dlqctl does.
var stores = effects.Stores{Redis: Store{}}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, rawURL string, opts effects.Options) effects.Probe {
	t.Helper()
	p, err := stores.Open(testCtx(t), rawURL, opts)
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

// consumerState is what a consumer recorded, as the other stores' tests
// record it (Redis keeps no status).
var consumerState = []effects.Record{
	{EventID: "E1", Attempts: 1, Effects: 1, Fingerprint: "sha256:aaa"},
	{EventID: "E2", Attempts: 3, Effects: 1, Fingerprint: "sha256:bbb"},
	{EventID: "E3", Attempts: 2, Effects: 2, Fingerprint: "sha256:ccc"},
	{EventID: "E4", Attempts: 1, Effects: 1, Fingerprint: "sha256:other"},
	{EventID: "E5", Attempts: 1, Effects: 0, Fingerprint: "sha256:eee"},
	{EventID: "it's E7 ü", Attempts: 1, Effects: 1, Fingerprint: "sha256:fff"},
	{EventID: "E8", Attempts: 2, Effects: 1, Fingerprint: ""},
	{EventID: "E9 with spaces", Attempts: 9, Effects: 1, Fingerprint: "sha256:999"},
}

func wantRecords() map[string]effects.Record {
	want := map[string]effects.Record{}
	for _, r := range consumerState {
		want[r.EventID] = r
	}
	return want
}

// loadRedis writes state into hashes of their own and returns their URL.
func loadRedis(t *testing.T, state []effects.Record) string {
	t.Helper()
	prefix := fmt.Sprintf("consumer%d:", seq.Add(1))
	c := rds.Client()
	ctx := testCtx(t)
	for _, r := range state {
		err := c.HSet(ctx, prefix+"attempts", r.EventID, r.Attempts).Err()
		if err == nil {
			err = c.HSet(ctx, prefix+"effects", r.EventID, r.Effects).Err()
		}
		if err == nil {
			err = c.HSet(ctx, prefix+"fingerprints", r.EventID, r.Fingerprint).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	q := url.Values{"attempts": {prefix + "attempts"}, "effects": {prefix + "effects"}, "fingerprints": {prefix + "fingerprints"}}
	return "redis://" + rds.Addr() + "/0?" + q.Encode()
}

// The Redis store returns what the consumer recorded, leaves out what it
// never saw, and answers an empty batch with nothing.
func TestRecords(t *testing.T) {
	p := open(t, loadRedis(t, consumerState), effects.Options{})
	got, err := p.Records(testCtx(t), []string{"E1", "E2", "E3", "E4", "E5", "E6", "it's E7 ü", "E8", "E9 with spaces", "E1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := wantRecords(); !maps.Equal(got, want) {
		t.Errorf("records differ:\n got %v\nwant %v", got, want)
	}
	empty, err := p.Records(testCtx(t), nil)
	if err != nil || len(empty) != 0 {
		t.Errorf("empty batch: %v, %v", empty, err)
	}
}

// A batch of 50 event IDs costs one pipeline of one HMGET per hash.
func TestOneRoundTripPerBatch(t *testing.T) {
	ids := []string{}
	for _, r := range consumerState {
		ids = append(ids, r.EventID)
	}
	for i := len(ids); i < 50; i++ {
		ids = append(ids, fmt.Sprintf("unknown-%02d", i))
	}
	p := open(t, loadRedis(t, consumerState), effects.Options{})
	var hook redisCounter
	p.(*redisProbe).rdb.AddHook(&hook)
	hmgets := commandCalls(t, "hmget")
	got, err := p.Records(testCtx(t), ids)
	if err != nil {
		t.Fatal(err)
	}
	if want := wantRecords(); !maps.Equal(got, want) {
		t.Errorf("records differ:\n got %v\nwant %v", got, want)
	}
	if c, pl := hook.commands.Load(), hook.pipelines.Load(); c != 0 || pl != 1 {
		t.Errorf("%d commands and %d pipelines for 50 event IDs, want 0 and 1", c, pl)
	}
	// One HMGET per hash (attempts, effects, fingerprints), whatever the
	// batch size.
	if n := commandCalls(t, "hmget") - hmgets; n != 3 {
		t.Errorf("server counted %d HMGET, want 3", n)
	}
}

func TestConfigErrors(t *testing.T) {
	const pw = "s3cretPW"
	for _, c := range []struct{ name, url, want string }{
		{"without attempts", "redis://:" + pw + "@localhost:6379/0?effects=e", "attempts=HASH"},
		{"without effects", "redis://:" + pw + "@localhost:6379/0?attempts=a", "effects=HASH"},
		{"unknown param", "redis://:" + pw + "@localhost/0?attempts=a&effects=b&stream=s", `unknown query parameter "stream"`},
		{"bad db", "redis://:" + pw + "@localhost/x?attempts=a&effects=b", "bad database"},
		{"bad port", "redis://:" + pw + "@localhost:99999/0?attempts=a&effects=b", "port"},
		{"tls param without tls", "redis://localhost/0?attempts=a&effects=b&tls_insecure=true", "needs rediss"},
		{"unparsable", "redis://u:" + pw + "%zz@localhost/0?attempts=a&effects=b", "not a valid URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := stores.Open(testCtx(t), c.url, effects.Options{})
			if err == nil {
				p.Close()
				t.Fatalf("Open(%q) succeeded", c.url)
			}
			effectstest.ConfigError(t, err, pw, c.want)
		})
	}
}

// A server that cannot be reached, or that refuses the password, is an
// error (exit 1), not a ConfigError, and names no password.
func TestUnreachableOrRefused(t *testing.T) {
	const right, wrong = "r1ghtPassw0rd", "wr0ngPassw0rd"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	_, err = stores.Open(testCtx(t), "redis://:"+wrong+"@"+closed+"/0?attempts=a&effects=b", effects.Options{Timeout: 5 * time.Second})
	effectstest.PlainError(t, err, wrong, "refused")

	rs := redistest.Start(t, "--requirepass", right)
	_, err = stores.Open(testCtx(t), "redis://:"+wrong+"@"+rs.Addr()+"/0?attempts=a&effects=b", effects.Options{})
	effectstest.PlainError(t, err, wrong, "authentication failed")
	_, err = stores.Open(testCtx(t), "redis://"+rs.Addr()+"/0?attempts=a&effects=b", effects.Options{Password: wrong})
	effectstest.PlainError(t, err, wrong, "authentication failed")
	p := open(t, "redis://"+rs.Addr()+"/0?attempts=a&effects=b", effects.Options{Password: right})
	if _, err := p.Records(testCtx(t), []string{"E1"}); err != nil {
		t.Errorf("with the right password: %v", err)
	}
	p = open(t, "redis://:"+right+"@"+rs.Addr()+"/0?attempts=a&effects=b", effects.Options{})
	if want := "redis://:xxxxx@" + rs.Addr() + "/0?attempts=a&effects=b"; p.String() != want {
		t.Errorf("String() = %q, want %q", p.String(), want)
	}
}

func TestRedisErrors(t *testing.T) {
	ctx := testCtx(t)
	if err := rds.Client().Set(ctx, "not-a-hash", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := stores.Open(ctx, "redis://"+rds.Addr()+"/0?attempts=not-a-hash&effects=b", effects.Options{})
	var ce *backend.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not a hash") {
		t.Errorf("a key of another type: %v, want a ConfigError", err)
	}

	if err := rds.Client().HSet(ctx, "bad-attempts", "E1", "many").Err(); err != nil {
		t.Fatal(err)
	}
	p := open(t, "redis://"+rds.Addr()+"/0?attempts=bad-attempts&effects=b", effects.Options{})
	if _, err := p.Records(ctx, []string{"E1"}); err == nil || !strings.Contains(err.Error(), "want an integer") {
		t.Errorf("a non-integer count: %v", err)
	}

	// Absent hashes are a consumer that has recorded nothing yet.
	p = open(t, "redis://"+rds.Addr()+"/0?attempts=none-a&effects=none-e", effects.Options{})
	if got, err := p.Records(ctx, []string{"E1"}); err != nil || len(got) != 0 {
		t.Errorf("absent hashes: %v, %v", got, err)
	}
}

// redisCounter counts what a go-redis client sends: single commands and
// pipelines, one round trip each.
type redisCounter struct{ commands, pipelines atomic.Int64 }

func (h *redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (h *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// commandCalls reads a command's call count from the server's INFO
// commandstats.
func commandCalls(t *testing.T, name string) int {
	t.Helper()
	info, err := rds.Client().Info(testCtx(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls=")
		if ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// TestURLErrorsShowNoQueryValue: a Redis effects URL refused for its
// query is refused with an error that names the key and shows none of the
// query's values: a value under a mistyped key (passwrod=) may be a secret.
func TestURLErrorsShowNoQueryValue(t *testing.T) {
	const mark = "Q7xZsecret"
	for _, raw := range []string{
		"redis://127.0.0.1:1/0?attempts=a&effects=b&passwrod=" + mark,
		"redis://127.0.0.1:1/0?attempts=a&effects=b&passwrod=" + mark + "%zz",
		"redis://127.0.0.1:1/0?attempts=a&effects=b&bogus=x@" + mark,
		"redis://127.0.0.1:1/0?attempts=a&effects=b&attempts=" + mark,
		"rediss://127.0.0.1:1/0?attempts=a&effects=b&tls_insecure=" + mark,
	} {
		_, err := stores.Open(testCtx(t), raw, effects.Options{Timeout: 5 * time.Second})
		if err == nil || strings.Contains(err.Error(), mark) {
			t.Errorf("%s: %v; want an error without %s", raw, err, mark)
		}
	}
}
