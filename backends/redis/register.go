package redisstream

import (
	"context"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
)

// Registration describes Redis Streams to the command layer.
func Registration() backend.Registration {
	return backend.Registration{
		Name:    "redis",
		Schemes: []string{"redis", "rediss"},
		Title:   "Redis Streams",
		Usage:   "redis://[user:pass@]host:port/db?stream=KEY",
		Summary: "A Redis stream, redriven to the stream its envelope names; `rediss://` for TLS, `&cluster=true` for Redis Cluster (a move across hash slots takes two journaled steps)",
		Env: []backend.EnvVar{
			{Name: "DLQCTL_REDIS_PASSWORD", Help: "password when the URL has none", Password: true},
		},
		Capabilities: backend.Capabilities{
			Read: true, Import: true, Move: "atomic", Resolve: true, Tail: true, Extras: true, Pending: true, Lease: true,
		},
		Factory: backend.NewFactory(parseURL, func(ctx context.Context, src sourceURL, o backend.OpenOptions) (backend.Source, error) {
			return openURL(ctx, src, Options{Fields: o.Fields, Password: password(o)})
		}),
		Setup:        quietLogs,
		GroupsSource: groupsSource,
		ProfileKeys:  []string{"redis_password"},
		Secrets:      func(o backend.OpenOptions) []string { return []string{password(o)} },
	}
}

func password(o backend.OpenOptions) string {
	if p := o.Env("DLQCTL_REDIS_PASSWORD"); p != "" {
		return p
	}
	return o.ProfileSecret("redis_password")
}

// groupsSource is the source pending opens for stream's groups: the source
// in effect, which may name no stream (it names the server), with
// stream=STREAM added, since a source must name one.
func groupsSource(raw, stream string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Query().Get("stream") != "" {
		return raw
	}
	q := u.Query()
	q.Set("stream", stream)
	u.RawQuery = q.Encode()
	return u.String()
}

// quietLogs silences go-redis's global logger: it logs dial retries, and
// every failure reaches the user as a returned error, so the log is only
// noise (on stderr, between a command's own lines).
func quietLogs() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
