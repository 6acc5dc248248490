// Package backend defines what dlqctl needs from a dead-letter queue. Each
// backend (dirqueue, redisstream, pulsar) lives in its own package and
// implements these interfaces; commands only see the interfaces.
package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlqctl/dlqctl/envelope"
)

// Source is a DLQ that can be read without consuming it.
type Source interface {
	// Scan calls fn for every entry in dead-letter order, oldest first,
	// starting after the locator `after` ("" starts at the beginning). It
	// reads in pages and never holds the whole DLQ. fn may return ErrStop to
	// end the scan early without an error.
	//
	// An envelope's ID is a string of its own, since callers keep the ID
	// of every entry (a plan, discover's groups). Its other strings may be
	// slices of the whole entry's text, payload included: a caller that
	// keeps one of them for many entries keeps a copy (strings.Clone).
	Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error
	// Get returns the entry whose locator is id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (envelope.Envelope, error)
	// Len is the number of entries in the DLQ.
	Len(ctx context.Context) (int64, error)
	// String names the DLQ with any password replaced by xxxxx.
	String() string
	Close() error
}

// LeanScanner is a Source that scans more cheaply for a caller that reads
// neither properties nor payload encodings nor raw forms: stats and the
// conflicts pass. ScanLean gives what Scan gives, in the same order, with
// Properties, PayloadEncoding and Raw left empty; everything else,
// Malformed and its reason included, is the same.
type LeanScanner interface {
	ScanLean(ctx context.Context, after string, fn func(envelope.Envelope) error) error
}

// Importer writes envelopes into a DLQ (dlqctl import).
type Importer interface {
	// Import adds e and returns its locator. It refuses, with an error
	// wrapping ErrExists, an envelope whose id is already present.
	Import(ctx context.Context, e envelope.Envelope) (string, error)
	// Has reports whether an envelope with this id was imported already
	// (or is there under this locator), so an import can be refused whole
	// before anything is written.
	Has(ctx context.Context, id string) (bool, error)
}

// MissingReporter is a source that can say its DLQ did not exist when it
// was opened (a Redis stream that is not there, a queue folder opened with
// AllowMissing). Such a source reads as empty. MissingDLQ is "" when the
// DLQ exists, else a phrase naming what does not exist after the source's
// redacted URL ("redis://h:6379/0?stream=dlq: stream "dlq" does not exist").
type MissingReporter interface {
	MissingDLQ() string
}

// UnseenCounter is a source whose scan can miss entries that are in the
// DLQ all the same (SQS: messages in flight, held by another reader or by
// a killed scan); Unseen is how many the last scan could not see.
type UnseenCounter interface{ Unseen() int64 }

// Extras is implemented by backends that have more to say in `stats`
// (Redis consumer groups, Pulsar subscription backlog). The value is
// encoded under "backend" in dlqctl.stats/v1.
type Extras interface {
	Extras(ctx context.Context, origins []string) (ExtraStats, error)
}

// ExtraStats is a backend's own section of `stats`: a JSON document and
// the same facts as rows for a table.
type ExtraStats struct {
	JSON  any
	Title string
	Rows  [][2]string
}

var (
	// ErrNotFound: no entry with that locator.
	ErrNotFound = errors.New("not found")
	// ErrExists: an entry with that id is already present.
	ErrExists = errors.New("already present")
	// ErrStop ends a Scan early; Scan then returns nil.
	ErrStop = errors.New("stop scan")
)

// ConfigError is a source URL or option that is wrong as written: retrying
// cannot help (exit code 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Configf builds a ConfigError.
func Configf(format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...)}
}

// Redacted replaces a password or token wherever dlqctl prints a URL.
const Redacted = "xxxxx"

// Scrub replaces every secret (of 3 characters or more) in err's text by
// Redacted: client libraries quote URLs, and with them passwords, in their
// errors. errors.Is and errors.As still see through the result, and a
// ConfigError stays one.
func Scrub(err error, secrets ...string) error {
	return ScrubAround(err, nil, secrets...)
}

// ScrubAround is Scrub that leaves every occurrence of the keep strings
// as it is: a URL's display forms, which hide its password already. A
// password that equals the user name (RabbitMQ's guest:guest) would
// otherwise hide the user name in them, which every other echo of that URL
// shows.
func ScrubAround(err error, keep []string, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg, hit := scrubText(err.Error(), keep, secrets)
	if !hit {
		return err
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		return &ConfigError{Err: errors.New(msg)}
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubText replaces the secrets in msg outside the keep strings, and
// says whether it replaced any.
func scrubText(msg string, keep, secrets []string) (string, bool) {
	for len(keep) > 0 && (keep[0] == "" || !strings.Contains(msg, keep[0])) {
		keep = keep[1:]
	}
	if len(keep) > 0 {
		pieces := strings.Split(msg, keep[0])
		hit := false
		for i, p := range pieces {
			var h bool
			pieces[i], h = scrubText(p, keep[1:], secrets)
			hit = hit || h
		}
		return strings.Join(pieces, keep[0]), hit
	}
	hit := false
	for _, s := range secrets {
		if len(s) >= 3 && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, Redacted)
			hit = true
		}
	}
	return msg, hit
}

// scrubbedError keeps errors.Is working on an error whose text was scrubbed.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
