package sqsdlq

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
)

// scanGC is the collector's GOGC for commands reading an SQS DLQ
// (backend.Registration.ScanGC). A scan holds an order key and a receipt
// handle per message until its end, while each receive decodes about 7 KB
// per message into garbage; at Go's default the heap grows to twice what
// is live before a collection. A scan waits on the network, not the CPU,
// so collecting twice as often costs little and keeps the peak near what
// is live.
const scanGC = 50

// Registration describes Amazon SQS to the command layer. It serves sqs://
// and https://: an https URL is taken only when its host is an AWS SQS
// endpoint (https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE); any other is
// refused with a configuration error that points at sqs://…?endpoint=.
func Registration() backend.Registration {
	return backend.Registration{
		Name:        "sqs",
		Schemes:     []string{"sqs", "https"},
		Claims:      claims,
		Title:       "Amazon SQS",
		EventIDFrom: "attribute:NAME or json:PATH",
		Usage:       "sqs://QUEUE?region=R[&endpoint=URL] or https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE",
		Summary:     "an SQS dead-letter queue (standard or FIFO); credentials from the AWS chain",
		Env: []backend.EnvVar{
			{Name: "AWS_REGION", Help: "region when the URL names none"},
			{Name: "AWS_PROFILE", Help: "shared config profile (SSO and assumed roles included)"},
			{Name: "AWS_ACCESS_KEY_ID", Help: "with AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN): static credentials"},
		},
		ScanGC: scanGC,
		Capabilities: backend.Capabilities{
			Read: true, Import: true, Move: "two-step", Resolve: true, Tail: false, Extras: true, Lease: true,
		},
		Factory: backend.NewFactory(parseURL, func(ctx context.Context, src sourceURL, o backend.OpenOptions) (backend.Source, error) {
			from, err := ParseSQSEventIDSource(o.EventIDFrom)
			if err != nil {
				return nil, &backend.ConfigError{Err: err}
			}
			return openURL(ctx, src, Options{Fields: o.Fields, EventIDFrom: from})
		}),
		// Credentials are the SDK's to find and never pass through dlqctl;
		// the SDK keeps them out of its error messages.
		Secrets: func(o backend.OpenOptions) []string {
			return []string{o.Env("AWS_SECRET_ACCESS_KEY"), o.Env("AWS_SESSION_TOKEN")}
		},
	}
}
