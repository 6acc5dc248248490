package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// pollWait is how long one Next waits for a message before it reports
// errIdle: the BLOCK of XREADGROUP, the sleep between inbox listings.
const pollWait = 200 * time.Millisecond

// readCount is how many entries one XREADGROUP asks for.
const readCount = 10

// errIdle: no message arrived within pollWait.
var errIdle = errors.New("no message")

// Message is one delivered message, as the worker loop sees it.
type Message struct {
	// ID is the backend's locator: stream entry ID, inbox file name,
	// partition/offset, message or delivery ID.
	ID string
	// Envelope is the message decoded; Malformed is set when it could not
	// be (then there is no event_id to deduplicate on).
	Envelope envelope.Envelope
}

// DeadLetter is what a dead-lettered message carries besides its own
// fields.
type DeadLetter struct {
	LastError string
	Attempts  int64
	At        time.Time
}

// Receipt is a backend's hold on one delivered message: what the loop
// settles it with, once, after the inbox transaction has committed.
type Receipt interface {
	// Ack says the message is done: it is not delivered again.
	Ack(ctx context.Context) error
	// DeadLetter puts the message in the DLQ and acks it: in one atomic
	// step on Redis and dir, a produce (publish) then the ack on Kafka and
	// NATS's copy mode. Where the broker dead-letters by itself (Pulsar's
	// client, SQS's redrive policy, RabbitMQ's dead-letter exchange, NATS's
	// nak and term modes) it hands the message back to the broker instead.
	DeadLetter(ctx context.Context, dl DeadLetter) error
}

// Source delivers messages. Each backend's mode is one Source in its own
// file.
type Source interface {
	// Next returns the next message and its receipt, or errIdle after
	// pollWait without one.
	Next(ctx context.Context) (Message, Receipt, error)
	Close() error
}

// mode is one backend's mode of the worker: the --source URLs it takes
// and how it opens them. Each backend's file defines its own.
type mode struct {
	// prefixes are the --source prefixes it takes ("redis://", "dir:").
	prefixes []string
	// usage is the --source form that errors name; help is the one --help
	// names, with the optional parameters.
	usage, help string
	open        func(ctx context.Context, opts Options, stderr io.Writer) (Source, error)
	// create makes what a rehearsal needs and the broker does not make by
	// itself, the origin and its DLQ, leaving what exists as it is
	// (--create); nil when the mode has nothing to make.
	create func(ctx context.Context, opts Options, stdout io.Writer) error
}

// modes are the worker's modes in this build, in the order --help names
// them. A backend's mode is its own file, NAME.go, built unless the tag
// no_NAME is set (NAME_off.go then gives an empty mode, left out here),
// and one entry here: a test builds the worker with the mode it needs
// alone (internal/workertest), as backends/all builds dlqctl.
func modes() []mode {
	var in []mode
	for _, m := range []mode{redisMode(), kafkaMode(), pulsarMode(), sqsMode(), rabbitMode(), natsMode(), dirMode()} {
		if m.open != nil {
			in = append(in, m)
		}
	}
	return in
}

// modeOf returns the mode that takes the --source URL raw.
func modeOf(raw string) (mode, bool) {
	for _, m := range modes() {
		for _, p := range m.prefixes {
			if strings.HasPrefix(raw, p) {
				return m, true
			}
		}
	}
	return mode{}, false
}

// short names the mode in a list: its scheme ("redis://…"), or its usage
// when it has no URL scheme (dir:PATH).
func (m mode) short() string {
	if p := m.prefixes[0]; strings.HasSuffix(p, "://") {
		return p + "…"
	}
	return m.usage
}

// sourceForms lists what each mode takes, as form returns it: "A, B or C".
func sourceForms(form func(mode) string) string {
	var forms []string
	for _, m := range modes() {
		forms = append(forms, form(m))
	}
	return joinList(forms, " or ")
}

// createForms lists the schemes of the modes that --create serves.
func createForms() string {
	var forms []string
	for _, m := range modes() {
		if m.create != nil {
			forms = append(forms, m.prefixes[0])
		}
	}
	return joinList(forms, " and ")
}

// joinList joins items with ", ", and the last one with last.
func joinList(items []string, last string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + last + items[len(items)-1]
}

// sourceQuery reads the query of a --source URL, raw, with the keys a
// mode knows; hasUser says its parse found user info. Its errors read as
// dlqctl's: they name a key, and show neither a value (one typed under a
// mistyped key may be a secret) nor the URL's user info or query
// (sourceURL).
func sourceQuery(raw, rawQuery string, hasUser bool, known ...string) (*backend.URLQuery, error) {
	q, err := backend.ParseURLQuery(rawQuery, known, backend.StrayAt(raw, hasUser))
	if err != nil {
		return nil, usagef("--source %s: %v", sourceURL(raw), err)
	}
	return q, nil
}

// masked stands for a --source query value in an error.
const masked = backend.Redacted

// sourceURL is the --source URL as an error shows it: no user info, no
// query.
func sourceURL(raw string) string { return backend.URLForError(raw) }

func openSource(ctx context.Context, opts Options, stderr io.Writer) (Source, error) {
	m, ok := modeOf(opts.Source)
	if !ok {
		return nil, usagef("--source %s: want %s", sourceURL(opts.Source), sourceForms(func(m mode) string { return m.usage }))
	}
	return m.open(ctx, opts, stderr)
}

// create runs --create for the source's mode.
func create(ctx context.Context, opts Options, stdout io.Writer) error {
	m, ok := modeOf(opts.Source)
	if !ok || m.create == nil {
		return usagef("--create: only for %s sources", createForms())
	}
	return m.create(ctx, opts, stdout)
}
