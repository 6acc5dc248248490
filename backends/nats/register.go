package natsdlq

import (
	"context"
	"os"

	"github.com/dlqctl/dlqctl/backend"
)

// Registration describes NATS JetStream to the command layer.
func Registration() backend.Registration {
	return backend.Registration{
		Name:    Name,
		Title:   "NATS JetStream",
		Schemes: []string{"nats", "tls"},
		Usage:   "nats://[user:pass@|token@]host:port?stream=DLQSTREAM[&advisories=1][&creds=FILE] or tls://…",
		Summary: "a JetStream stream of dead-letter copies that consumers publish (headers carry the envelope fields), or with advisories=1 a stream of the server's MAX_DELIVERIES and MSG_TERMINATED advisories that `dlq init` creates",
		Env: []backend.EnvVar{
			{Name: PasswordEnv, Help: "password for the URL's user when the URL has none", Password: true},
		},
		Capabilities: backend.Capabilities{
			Read: true, Import: true, Move: "two-step", Resolve: true, Tail: true, Extras: true, Lease: true,
		},
		// Parsed without the environment, as a display needs; Open reads
		// the password there for a user named without one.
		Factory: backend.NewFactory(func(raw string) (sourceURL, error) { return parseURL(raw, nil) },
			func(ctx context.Context, src sourceURL, o backend.OpenOptions) (backend.Source, error) {
				if o.EventIDFrom != "" {
					return nil, backend.Configf("nats: --event-id-from is not supported: the event ID is the event_id header, else Nats-Msg-Id")
				}
				src, err := src.withEnv(o.Getenv)
				if err != nil {
					return nil, err
				}
				return openURL(ctx, src, Options{Fields: o.Fields, Getenv: o.Getenv})
			}),
		// Init has no options to read the environment from: the
		// password comes from the process's own, as Open's would.
		Init: func(raw string) error {
			return initStream(context.Background(), raw, os.Getenv)
		},
		InitDLQ: initAdvisoryStream,
		Secrets: func(o backend.OpenOptions) []string {
			return []string{o.Env(PasswordEnv)}
		},
	}
}
