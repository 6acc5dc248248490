package backend

import (
	"context"
	"fmt"
)

// URLConfig is a backend's source URL as its parser understood it: typed,
// so that Open takes it as it is and the URL is parsed once.
type URLConfig interface {
	// Display is the URL with every secret replaced by Redacted.
	Display() string
	// Secrets are the secret strings the URL holds (passwords, tokens),
	// so that every echo and error can be scrubbed of them.
	Secrets() []string
}

// Factory parses a backend's source URL and opens what it parsed. A
// backend makes it from its typed parser and opener with NewFactory; the
// registry parses a URL once and hands the result to Open.
type Factory struct {
	// Parse checks raw without connecting. Its error must not contain a
	// secret; Parsed.Secrets lists those found so callers can scrub.
	Parse func(raw string) (Parsed, error)
	// Open connects to the DLQ that Parse found (Parsed.Config). Its
	// errors are scrubbed of every secret that Parse found and of every
	// secret that it read from opts.
	Open func(ctx context.Context, p Parsed, opts OpenOptions) (Source, error)
}

// NewFactory is the Factory of a backend whose parser gives its typed URL
// C: Parse keeps the C in Parsed.Config, with C's display form and
// secrets, and Open hands that C to open. parse returns what it has read
// even with an error (a value, not a nil pointer), so that a password it
// read before the mistake is scrubbed from the error.
func NewFactory[C URLConfig](parse func(raw string) (C, error), open func(ctx context.Context, cfg C, opts OpenOptions) (Source, error)) Factory {
	return Factory{
		Parse: func(raw string) (Parsed, error) {
			cfg, err := parse(raw)
			if err != nil {
				return Parsed{}, Scrub(err, cfg.Secrets()...)
			}
			return Parsed{Display: cfg.Display(), Secrets: cfg.Secrets(), Config: cfg}, nil
		},
		Open: func(ctx context.Context, p Parsed, opts OpenOptions) (Source, error) {
			cfg, ok := p.Config.(C)
			if !ok {
				// A programming error: the Parsed came from elsewhere.
				return nil, fmt.Errorf("backend: Open got a %T, not the %T its Parse gives", p.Config, cfg)
			}
			return open(ctx, cfg, opts)
		},
	}
}
