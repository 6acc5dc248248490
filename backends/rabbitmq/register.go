package rabbitmq

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
)

// Registration describes RabbitMQ to the command layer.
func Registration() backend.Registration {
	return backend.Registration{
		Name:        "rabbitmq",
		Schemes:     []string{"amqp", "amqps"},
		Title:       "RabbitMQ",
		EventIDFrom: "property:message_id, header:NAME or json:PATH",
		KeyFrom:     "header:NAME",
		Usage:       "amqp://[user:pass@]host:port/VHOST?queue=DLQ[&admin=HTTPURL] (amqps:// for TLS: &tls_ca=FILE, &tls_server_name=NAME)",
		Summary:     "a RabbitMQ queue fed by a dead-letter exchange (x-death decoded): a stream (dlq init makes one), read by offset for free; or a classic or quorum queue, read by consuming without acks and giving every message back, so a quorum DLQ's delivery limit is read through admin= and never reached; removals are recorded in queues of dlqctl's so that a broker crash cannot bring them back",
		Env: []backend.EnvVar{
			{Name: "DLQCTL_AMQP_PASSWORD", Help: "password when the URL names a user without one (also the profile's amqp_password)", Password: true},
		},
		Capabilities: backend.Capabilities{
			Read: true, Import: true, Move: "two-step", Resolve: true, Tail: true, Extras: true, Lease: true,
		},
		Factory: backend.NewFactory(parseURL, func(ctx context.Context, src sourceURL, o backend.OpenOptions) (backend.Source, error) {
			return openURL(ctx, src, Options{Password: password(o), Fields: o.Fields, EventIDFrom: o.EventIDFrom, KeyFrom: o.KeyFrom})
		}),
		Secrets: func(o backend.OpenOptions) []string { return []string{password(o)} },
		InitDLQ: initStreamDLQ,
	}
}

// password is DLQCTL_AMQP_PASSWORD, else the profile's amqp_password.
func password(o backend.OpenOptions) string {
	if pw := o.Env("DLQCTL_AMQP_PASSWORD"); pw != "" {
		return pw
	}
	return o.ProfileSecret("amqp_password")
}
