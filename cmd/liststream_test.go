package cmd

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// fakeGenSource is a fake backend (scheme fakegen:) that makes n entries on
// the fly, so that a test can see what the command wrote while a scan is
// still under way, which no real backend lets a test observe.
type fakeGenSource struct {
	n     int
	scans int
	// during is called with each entry's index in the scan the command
	// prints from (the second: the first finds conflicts).
	during func(i int)
}

func (s *fakeGenSource) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	s.scans++
	for i := range s.n {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.scans == 2 && s.during != nil {
			s.during(i)
		}
		e := envelope.Envelope{
			ID: fmt.Sprintf("%d-0", i+1), EventID: fmt.Sprintf("E%d", i), Fingerprint: "sha256:aa",
			Attempts: 3, LastError: "timeout calling payments", Origin: envelope.Origin{Topic: "orders"},
			DeadLetteredAt: testNow.Add(-time.Hour),
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (s *fakeGenSource) Get(context.Context, string) (envelope.Envelope, error) {
	return envelope.Envelope{}, backend.ErrNotFound
}
func (s *fakeGenSource) Len(context.Context) (int64, error) { return int64(s.n), nil }
func (s *fakeGenSource) String() string                     { return "fakegen:" }
func (s *fakeGenSource) Close() error                       { return nil }

func fakeGenFactory(src *fakeGenSource) (*Factory, *bytes.Buffer) {
	reg := backend.NewRegistry()
	reg.Register(backend.Registration{
		Name: "fakegen", Schemes: []string{"fakegen"}, Usage: "fakegen:", Summary: "generated entries (test fake)",
		Capabilities: backend.Capabilities{Read: true},
		Factory: backend.Factory{
			Parse: func(raw string) (backend.Parsed, error) { return backend.Parsed{Display: raw}, nil },
			Open:  func(context.Context, backend.Parsed, backend.OpenOptions) (backend.Source, error) { return src, nil },
		},
	})
	io, _, out, _ := TestIO()
	f := &Factory{Deps: Deps{IO: io, Now: func() time.Time { return testNow }, Getenv: func(string) string { return "" }, Backends: reg}}
	return f, out
}

// TestListPipedStreams: a piped `list --limit 0` writes its rows while the
// scan is still reading, so its memory does not grow with the DLQ. When the
// scan reaches its last entry, all but a buffer's worth of the rows before
// it are already out.
func TestListPipedStreams(t *testing.T) {
	const n = 5000
	src := &fakeGenSource{n: n}
	f, out := fakeGenFactory(src)
	linesBeforeLast := -1
	src.during = func(i int) {
		if i == n-1 {
			linesBeforeLast = strings.Count(out.String(), "\n")
		}
	}
	if code := Execute(context.Background(), f, []string{"--source", "fakegen:", "list", "--limit", "0"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != n+1 {
		t.Fatalf("%d lines, want a header and %d rows", len(lines), n)
	}
	if lines[0] != "ID\tEVENT ID\tAGE\tATTEMPTS\tCATEGORY\tORIGIN\tERROR" {
		t.Errorf("header %q", lines[0])
	}
	if want := "1-0\tE0\t3600\t3\ttransient\torders\ttimeout calling payments"; lines[1] != want {
		t.Errorf("first row %q, want %q", lines[1], want)
	}
	// One row is about 60 bytes; the writer's buffer holds 4 KiB.
	if linesBeforeLast < n-200 {
		t.Errorf("%d lines written when the scan reached its last entry; the rows were held back", linesBeforeLast)
	}
}

// TestListPipedEmpty: streaming keeps the header of an empty listing.
func TestListPipedEmpty(t *testing.T) {
	f, out := fakeGenFactory(&fakeGenSource{n: 0})
	if code := Execute(context.Background(), f, []string{"--source", "fakegen:", "list"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := out.String(); got != "ID\tEVENT ID\tAGE\tATTEMPTS\tCATEGORY\tORIGIN\tERROR\n" {
		t.Errorf("output %q", got)
	}
}

// TestListMarkdownStreams: markdown rows need no widths either, and come
// out as the whole table did before rows were streamed.
func TestListMarkdownStreams(t *testing.T) {
	f, out := fakeGenFactory(&fakeGenSource{n: 2})
	if code := Execute(context.Background(), f, []string{"--source", "fakegen:", "-o", "markdown", "list"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := "| id | event id | age | attempts | category | origin | error |\n" +
		"|---|---|---|---|---|---|---|\n" +
		"| 1-0 | E0 | 1h | 3 | transient | orders | timeout calling payments |\n" +
		"| 2-0 | E1 | 1h | 3 | transient | orders | timeout calling payments |\n"
	if got := out.String(); got != want {
		t.Errorf("markdown\n%s\nwant\n%s", got, want)
	}
}
