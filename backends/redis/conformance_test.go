package redisstream_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	redisstream "github.com/dlqctl/dlqctl/backends/redis"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(redisstream.Registration())

// TestConformance runs the shared conformance suite on Redis Streams, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
		n := 0
		// client is a client on fx's database, closed with t.
		client := func(t *testing.T, fx conformance.Fixture) *redis.Client {
			u, err := url.Parse(fx.Source)
			if err != nil {
				t.Fatal(err)
			}
			var db int
			fmt.Sscanf(strings.TrimPrefix(u.Path, "/"), "%d", &db)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: db})
			t.Cleanup(func() { c.Close() })
			return c
		}
		pid := func() int {
			info, err := srv.Client().Info(context.Background(), "server").Result()
			if err != nil {
				return 0
			}
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
					n, _ := strconv.Atoi(v)
					return n
				}
			}
			return 0
		}
		return &conformance.Target{Down: srv.Down, Up: srv.Up, Refuse: func(t *testing.T, fx conformance.Fixture, dest, _ string) {
			// A string where the stream should be: XADD answers WRONGTYPE.
			if err := client(t, fx).Set(context.Background(), dest, "not a stream", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}, Fresh: func(t *testing.T) conformance.Fixture {
			n++
			db := n % 16
			key := fmt.Sprintf("conf%d", n)
			return conformance.Fixture{Source: srv.URL(db, key+"-dlq"), Origin: key + "-orders", Self: key + "-dlq",
				Alias: strings.Replace(srv.URL(db, key+"-dlq"), "127.0.0.1:", "localhost:", 1),
				Consume: []string{"--source", fmt.Sprintf("redis://%s/%d?stream=%s-orders&group=g", srv.Addr(), db, key),
					"--dlq", key + "-dlq"}}
		},
			// Every write is on disk before it is acknowledged (appendfsync
			// always), so a SIGKILL loses nothing acknowledged.
			Kill: func() error { return testproc.KillProcess(pid()) },
			PID:  pid,
			Held: func(t *testing.T, fx conformance.Fixture) int {
				n, err := client(t, fx).XLen(context.Background(), fx.Self).Result()
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			},
			Published: func(t *testing.T, fx conformance.Fixture) int {
				n, err := client(t, fx).XLen(context.Background(), fx.Origin).Result()
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			},
			Recreate: func(t *testing.T, fx conformance.Fixture) {
				// A stream exists while it holds entries or groups: DEL is
				// its deletion, and the next XADD makes it again.
				if err := client(t, fx).Del(context.Background(), fx.Self).Err(); err != nil {
					t.Fatal(err)
				}
			},
			Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
				return snapshot(t, client(t, fx), fx.Self)
			},
			Native: func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
				// As a service that dead-letters with XADD writes it: the
				// same fields each time; only the stream IDs differ.
				fields := []any{"event_id", e.EventID, "fingerprint", e.Fingerprint, "payload", string(e.Payload),
					"content_type", e.ContentType, "key", e.Key, "origin_stream", e.Origin.Topic,
					"last_error", e.LastError, "attempts", strconv.Itoa(e.Attempts),
					"dead_lettered_at", e.DeadLetteredAt.Format("2006-01-02T15:04:05Z07:00")}
				c := client(t, fx)
				for range copies {
					if err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: fx.Self, Values: fields}).Err(); err != nil {
						t.Fatal(err)
					}
				}
			},
			Bookkeeping: func(fx conformance.Fixture) []string { return []string{"dlqctl:lease:{" + fx.Self + "}"} },
			NotApplicable: map[string]string{
				"read-only-limited": "a read is XRANGE: no delivery count, no limit",
				"two-pointers":      "an entry is a stream entry holding its dead letter whole",
				"forged-record":     "no record of removals: a move deletes the stream entry (XDEL)",
			},
		}
	})
}

// snapshot is the DLQ stream's entries (fields) in order, and its
// consumer groups with their pending entries' delivery counts.
func snapshot(t *testing.T, c *redis.Client, key string) []string {
	ctx := context.Background()
	msgs, err := c.XRange(ctx, key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Entries by their place: a twin's XADD made other IDs.
	place := map[string]int{}
	var lines []string
	for i, m := range msgs {
		place[m.ID] = i + 1
		lines = append(lines, strconv.Itoa(i+1)+conformance.Fields(m.Values))
	}
	groups, err := c.XInfoGroups(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		lines = append(lines, fmt.Sprintf("group %s consumers %d pending %d last-delivered #%d entries-read %d",
			g.Name, g.Consumers, g.Pending, place[g.LastDeliveredID], g.EntriesRead))
		pend, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: g.Name, Start: "-", End: "+", Count: 1 << 20}).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pend {
			lines = append(lines, fmt.Sprintf("  pending #%d %s deliveries=%d", place[p.ID], p.Consumer, p.RetryCount))
		}
	}
	return lines
}
