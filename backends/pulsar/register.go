package pulsardlq

import (
	"context"
	"os"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Registration describes Apache Pulsar to the command layer.
func Registration() backend.Registration {
	return backend.Registration{
		Name:        "pulsar",
		Schemes:     []string{"pulsar", "pulsar+ssl"},
		Title:       "Apache Pulsar",
		EventIDFrom: "property:NAME, json:PATH or key",
		Usage:       "pulsar://host:port?topic=T&subscription=S&admin=URL",
		Summary:     "A DLQ topic read through a durable subscription (default `dlqctl`), redriven to its `REAL_TOPIC`; `pulsar+ssl://` for TLS",
		Env: []backend.EnvVar{
			{Name: "DLQCTL_PULSAR_TOKEN", Help: "JWT for the broker and the admin API"},
			{Name: "DLQCTL_PULSAR_TOKEN_FILE", Help: "file holding that token"},
		},
		Capabilities: backend.Capabilities{
			Read: true, Import: true, Move: "two-step", Resolve: true, Tail: true, Extras: true, Lease: true,
		},
		Factory: backend.NewFactory(parseURL, func(ctx context.Context, src sourceURL, o backend.OpenOptions) (backend.Source, error) {
			token, err := token(o)
			if err != nil {
				return nil, err
			}
			from, err := envelope.ParseEventIDSource(o.EventIDFrom)
			if err != nil {
				return nil, &backend.ConfigError{Err: err}
			}
			return openURL(ctx, src, Options{Token: token, Fields: o.Fields, EventIDFrom: from})
		}),
		ProfileKeys: []string{"pulsar_token"},
		Secrets: func(o backend.OpenOptions) []string {
			t, _ := token(o)
			return []string{t}
		},
	}
}

// token is DLQCTL_PULSAR_TOKEN, else the content of the file named by
// DLQCTL_PULSAR_TOKEN_FILE (surrounding white space trimmed), else the
// profile's pulsar_token; "" for none.
func token(o backend.OpenOptions) (string, error) {
	if tok := o.Env("DLQCTL_PULSAR_TOKEN"); tok != "" {
		return tok, nil
	}
	if path := o.Env("DLQCTL_PULSAR_TOKEN_FILE"); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", backend.Configf("DLQCTL_PULSAR_TOKEN_FILE: %v", err)
		}
		tok := strings.TrimSpace(string(raw))
		if tok == "" {
			return "", backend.Configf("DLQCTL_PULSAR_TOKEN_FILE: %s is empty", path)
		}
		return tok, nil
	}
	return o.ProfileSecret("pulsar_token"), nil
}
