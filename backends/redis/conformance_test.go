package redisstream_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	redisstream "github.com/dlqctl/dlqctl/backends/redis"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/conformance"
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
		return &conformance.Target{Down: srv.Down, Up: srv.Up, Refuse: func(t *testing.T, fx conformance.Fixture, dest, _ string) {
			// A string where the stream should be: XADD answers WRONGTYPE.
			u, err := url.Parse(fx.Source)
			if err != nil {
				t.Fatal(err)
			}
			var db int
			fmt.Sscanf(strings.TrimPrefix(u.Path, "/"), "%d", &db)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: db})
			defer c.Close()
			if err := c.Set(context.Background(), dest, "not a stream", 0).Err(); err != nil {
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
		}}
	})
}
