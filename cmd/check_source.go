package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// SourceRetentionDoc is one source log of stats' and check's
// source_retention: how long it still holds the record of its oldest entry
// that has no payload of its own.
type SourceRetentionDoc struct {
	Source string `json:"source"`
	Oldest string `json:"oldest"`
	// LeftSeconds and Until are null when the log keeps records for ever
	// by time.
	LeftSeconds *int64     `json:"left_seconds"`
	Until       *time.Time `json:"until"`
	Basis       string     `json:"basis"`
}

// sourceRetention asks src, where it reads payloads back from other logs,
// how long they still hold the oldest entries' records (nil otherwise).
func sourceRetention(ctx context.Context, src backend.Source, now time.Time) ([]SourceRetentionDoc, error) {
	r, ok := src.(backend.SourceRetainer)
	if !ok {
		return nil, nil
	}
	rs, err := r.SourceRetention(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make([]SourceRetentionDoc, 0, len(rs))
	for _, x := range rs {
		d := SourceRetentionDoc{Source: x.Source, Oldest: x.Oldest, Basis: x.Basis}
		if x.Limited {
			left, until := seconds(max(x.Left, 0)), x.Until.UTC()
			d.LeftSeconds, d.Until = &left, &until
		}
		out = append(out, d)
	}
	return out, nil
}

// soonestRetention is the least time any source still holds its oldest
// entry's record, ok false when none is limited.
func soonestRetention(rs []SourceRetentionDoc) (left time.Duration, ok bool) {
	for _, r := range rs {
		if r.LeftSeconds != nil && (!ok || time.Duration(*r.LeftSeconds)*time.Second < left) {
			left, ok = time.Duration(*r.LeftSeconds)*time.Second, true
		}
	}
	return left, ok
}

// writeSourceRetention is source_retention as text: one line per source,
// what is left and what that is based on.
func writeSourceRetention(w io.Writer, rs []SourceRetentionDoc, ro report.Options) error {
	if len(rs) == 0 {
		return nil
	}
	var fs []report.Field
	for _, r := range rs {
		left := "no limit by time"
		if r.LeftSeconds != nil {
			left = report.FormatAge(time.Duration(*r.LeftSeconds)*time.Second) + " left at the soonest"
		}
		fs = append(fs, report.Field{Key: r.Source, Value: fmt.Sprintf("%s (oldest record %s; %s)", left, r.Oldest, r.Basis)})
	}
	fmt.Fprintln(w)
	return report.WriteFields(w, "Source retention (how long each source still holds its oldest header-only entry's record)", fs, ro)
}

// malformedText is the malformed count, with how many of them lost their
// source where any did.
func malformedText(doc StatsDoc) string {
	if doc.SourceGone == 0 {
		return fmt.Sprint(doc.Malformed)
	}
	return fmt.Sprintf("%d (%d of them: source gone)", doc.Malformed, doc.SourceGone)
}

// parseSourceThresholds checks --max-source-gone and reads
// --min-source-retention (0 when not given).
func parseSourceThresholds(opts *checkOptions) (time.Duration, error) {
	if opts.maxSourceGone < -1 {
		return 0, usageErrorf("--max-source-gone %d: must be 0 or more", opts.maxSourceGone)
	}
	d, err := inspect.ParseDuration(opts.minSourceRetention)
	if err != nil {
		return 0, usageErrorf("--min-source-retention: %v", err)
	}
	return d, nil
}

// sourceViolations are the breached thresholds on entries whose payload
// lives in a source log: more of them gone than maxGone (-1: no limit),
// or a source that holds its oldest one's record for less than
// minRetention more (0: no limit).
func sourceViolations(maxGone int, minRetention time.Duration, doc CheckDoc) []Violation {
	var out []Violation
	if maxGone >= 0 && doc.SourceGone > maxGone {
		out = append(out, Violation{"max-source-gone", int64(maxGone), int64(doc.SourceGone)})
	}
	if left, ok := soonestRetention(doc.SourceRetention); minRetention > 0 && ok && left < minRetention {
		out = append(out, Violation{"min-source-retention", seconds(minRetention), seconds(left)})
	}
	return out
}
