package kafkadlq

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
)

// scanGC is the collector's GOGC for commands reading a Kafka DLQ
// (backend.Registration.ScanGC).
const scanGC = 300

// scanHeapLimit is the soft memory limit of commands reading a Kafka DLQ
// (backend.Registration.ScanHeapLimit): at scanGC's pace the heap would
// grow to four times what a scan holds live (its fetches, the state
// topic's entries), some 430 MiB for a million records and as many state
// records; under the limit the collector runs sooner instead.
const scanHeapLimit = 96 << 20

// Registration describes Apache Kafka to the command layer.
func Registration() backend.Registration {
	return backend.Registration{
		Name:        "kafka",
		Schemes:     []string{"kafka", "kafkas"},
		Title:       "Apache Kafka",
		EventIDFrom: "header:NAME, json:PATH or key",
		Usage:       "kafka://[user:pass@]host:port[,host:port…]?topic=DLQ[&sasl=plain|scram-sha-256|scram-sha-512] (kafkas:// for TLS: &tls_ca=FILE, &tls_server_name=NAME)",
		Summary:     "a dead-letter topic (Spring Kafka, Kafka Connect, Karafka, or a share group's broker, whose records are read back from the source: docs/kafka.md); redriven and resolved entries are recorded in a state topic that keeps every record. kafkas:// speaks TLS and trusts the system's CAs, or only the PEM file tls_ca= names; a user in the URL authenticates with SASL PLAIN unless sasl= names SCRAM",
		Env: []backend.EnvVar{
			{Name: "DLQCTL_KAFKA_PASSWORD", Help: "SASL password when the URL names a user without one", Password: true},
			{Name: "GOGC", Help: "the Go collector's pace: reads of a Kafka DLQ run at 300 unless it is set"},
			{Name: "GOMEMLIMIT", Help: "the Go collector's soft memory limit: reads of a Kafka DLQ run within 96MiB unless it is set (a larger one saves collector CPU on a large DLQ)"},
		},
		Capabilities: backend.Capabilities{
			Read: true, Import: true, Move: "atomic", Resolve: true, Tail: true, Extras: true, Lease: true,
		},
		// franz-go decodes each fetch into new memory; see decisions.md.
		ScanGC:        scanGC,
		ScanHeapLimit: scanHeapLimit,
		Factory: backend.NewFactory(parseURL, func(ctx context.Context, src sourceURL, o backend.OpenOptions) (backend.Source, error) {
			from, err := ParseKafkaEventIDSource(o.EventIDFrom)
			if err != nil {
				return nil, &backend.ConfigError{Err: err}
			}
			return openURL(ctx, src, Options{Password: password(o), Fields: o.Fields, EventIDFrom: from, Stderr: o.Stderr})
		}),
		Secrets: func(o backend.OpenOptions) []string { return []string{password(o)} },
		InitDLQ: initShareDLQ,
	}
}

// password is DLQCTL_KAFKA_PASSWORD, else the profile's kafka_password.
func password(o backend.OpenOptions) string {
	if pw := o.Env("DLQCTL_KAFKA_PASSWORD"); pw != "" {
		return pw
	}
	return o.ProfileSecret("kafka_password")
}
