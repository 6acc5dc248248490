package cmd

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
)

// selectorFlags are the selectors shared by list, sample, export and plan.
type selectorFlags struct {
	categories   []string
	dispositions []string
	origins      []string
	errorRegex   string
	eventIDs     []string
	owners       []string
	overdue      bool
	olderThan    string
	newerThan    string
	minAttempts  int
	limit        int
}

func (s *selectorFlags) register(fs *pflag.FlagSet, defaultLimit int) {
	fs.StringSliceVar(&s.categories, "category", nil, "only these categories (repeatable or comma-separated)")
	fs.StringSliceVar(&s.dispositions, "disposition", nil, "only these dispositions: "+strings.Join(envelope.Dispositions(), ", ")+" (repeatable or comma-separated)")
	fs.StringSliceVar(&s.origins, "origin", nil, "only entries from these origin topics/streams")
	fs.StringVar(&s.errorRegex, "error", "", "only entries whose last_error matches this regular expression")
	fs.StringArrayVar(&s.eventIDs, "event-id", nil, "only this event ID (repeatable)")
	fs.StringSliceVar(&s.owners, "owner", nil, "only entries owned by NAME")
	fs.BoolVar(&s.overdue, "overdue", false, "only entries past their recover_by deadline")
	fs.StringVar(&s.olderThan, "older-than", "", "only entries dead-lettered longer ago than DUR (e.g. 30m, 2h, 1d)")
	fs.StringVar(&s.newerThan, "newer-than", "", "only entries dead-lettered less than DUR ago")
	fs.IntVar(&s.minAttempts, "min-attempts", 0, "only entries with at least N delivery attempts")
	fs.IntVar(&s.limit, "limit", defaultLimit, "at most N entries (0: no limit)")
}

func (s *selectorFlags) selector() (inspect.Selector, error) {
	sel := inspect.Selector{
		Categories: s.categories, Dispositions: s.dispositions, Origins: s.origins, EventIDs: s.eventIDs, Owners: s.owners,
		Overdue: s.overdue, MinAttempts: s.minAttempts, Limit: s.limit,
	}
	if err := checkDispositions("--disposition", s.dispositions); err != nil {
		return sel, err
	}
	var err error
	if s.errorRegex != "" {
		if sel.Error, err = regexp.Compile(s.errorRegex); err != nil {
			return sel, usageErrorf("--error %q: %v", s.errorRegex, err)
		}
	}
	if sel.OlderThan, err = inspect.ParseDuration(s.olderThan); err != nil {
		return sel, usageErrorf("--older-than: %v", err)
	}
	if sel.NewerThan, err = inspect.ParseDuration(s.newerThan); err != nil {
		return sel, usageErrorf("--newer-than: %v", err)
	}
	if s.limit < 0 {
		return sel, usageErrorf("--limit %d: must be 0 or more", s.limit)
	}
	if s.minAttempts < 0 {
		return sel, usageErrorf("--min-attempts %d: must be 0 or more", s.minAttempts)
	}
	return sel, nil
}

// checkDispositions refuses names that are no disposition, so that a typo
// does not silently select (or allow) nothing.
func checkDispositions(flag string, names []string) error {
	for _, n := range names {
		found := false
		for _, d := range envelope.Dispositions() {
			found = found || d == n
		}
		if !found {
			return usageErrorf("%s %q: no such disposition%s (want one of %s)", flag, n, didYouMeanText(n, envelope.Dispositions()), strings.Join(envelope.Dispositions(), ", "))
		}
	}
	return nil
}

// session is an open source with the classifier and clock of one command.
type session struct {
	src    backend.Source
	walker inspect.Walker
}

// openSession opens the source in effect and builds the walker; close
// src when done.
func (f *Factory) openSession(ctx context.Context) (*session, error) {
	return f.openSessionAt(ctx, f.source)
}

// openSessionAt opens the DLQ at url with this invocation's settings and
// builds the walker; close src when done.
func (f *Factory) openSessionAt(ctx context.Context, url string) (*session, error) {
	cl, err := f.classifier()
	if err != nil {
		return nil, err
	}
	src, err := sourcesFor(f).OpenSource(ctx, url)
	if err != nil {
		return nil, err
	}
	if f.refusesMissing {
		if err := refuseMissing(src, f.allowMissing, f.offersAllowMissing); err != nil {
			src.Close()
			return nil, err
		}
	}
	if n, ok := src.(backend.Noticer); ok && n.Notice() != "" {
		fmt.Fprintln(f.IO.ErrOut, "dlqctl: note: "+n.Notice())
	}
	return &session{src: src, walker: inspect.Walker{Source: src, Classifier: cl, Now: f.now()}}, nil
}

func joinOr(items []string, empty string) string {
	if len(items) == 0 {
		return empty
	}
	return strings.Join(items, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
