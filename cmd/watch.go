package cmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/report"
)

type watchOptions struct {
	watch    bool
	interval time.Duration
	count    int
}

// WatchDoc is the watch section of dlqctl.stats/v1 under --watch.
type WatchDoc struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	// Change is the entry count minus the previous draw's (0 on the first).
	Change int `json:"change"`
	// GrowthPerMinute is Change scaled to a minute; null on the first draw.
	GrowthPerMinute *float64 `json:"growth_per_minute"`
	// Timeline counts entries by when they were dead-lettered, oldest
	// bucket first, so the start of an incident shows as a step.
	BucketSeconds float64          `json:"bucket_seconds"`
	Timeline      []TimelineBucket `json:"timeline"`
}

// TimelineBucket is one interval of the timeline.
type TimelineBucket struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
}

// timelineBuckets is how many intervals the timeline holds; a terminal
// shorter than the whole view gets fewer (see drawWatch), at least
// minTimelineBuckets.
const (
	timelineBuckets    = 20
	minTimelineBuckets = 4
)

// runWatch redraws stats every interval until Ctrl-C (or --count draws):
// on a terminal it repaints the screen; piped, each draw follows the last
// (one document a line with -o ndjson).
func runWatch(ctx context.Context, opts *statsOptions) error {
	o, format := &opts.watch, opts.Report.Format
	if o.interval < time.Second {
		return usageErrorf("--interval %s: must be at least 1s", o.interval)
	}
	if format == report.FormatJSON || format == report.FormatOpenMetrics {
		return usageErrorf("--watch draws repeatedly: use -o table, markdown or ndjson (one document a line), not -o %s", format)
	}
	s, err := opts.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	var prevTotal int
	var prevAt time.Time
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for draw := 1; ; draw++ {
		now := opts.Now().UTC().Truncate(time.Second)
		s.walker.Now = now
		sum, err := s.walker.Summarize(ctx)
		if err != nil {
			return err
		}
		times, err := deadLetterTimes(ctx, s.src)
		if err != nil {
			return err
		}
		doc := statsDoc(s.src, sum, now)
		w := &WatchDoc{IntervalSeconds: o.interval.Seconds()}
		if draw > 1 {
			w.Change = doc.Total - prevTotal
			if el := now.Sub(prevAt).Minutes(); el > 0 {
				g := float64(w.Change) / el
				w.GrowthPerMinute = &g
			}
		}
		prevTotal, prevAt = doc.Total, now
		doc.Watch = w
		if err := drawWatch(opts.IO, opts.Report, doc, times, o.interval); err != nil {
			return err
		}
		if o.count > 0 && draw >= o.count {
			return nil
		}
		// Ctrl-C ends a watch as it ends every command: exit 130, so a
		// script can tell it from --count running out.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func deadLetterTimes(ctx context.Context, src interface {
	Scan(context.Context, string, func(envelope.Envelope) error) error
}) ([]time.Time, error) {
	var out []time.Time
	err := src.Scan(ctx, "", func(e envelope.Envelope) error {
		if !e.DeadLetteredAt.IsZero() {
			out = append(out, e.DeadLetteredAt)
		}
		return nil
	})
	return out, err
}

// timeline fills w.Timeline with buckets intervals, the last one holding
// now. A bucket is one interval, or wider when the DLQ's history is longer
// than the timeline, so that the oldest entry still falls in the first
// bucket. Buckets start on whole multiples of their width in UTC (a day's
// at midnight, an hour's on the hour), so that a bucket labelled 11-29
// holds 11-29's dead letters, not a rolling 24 hours that began on 11-28.
func timeline(w *WatchDoc, times []time.Time, now time.Time, interval time.Duration, buckets int) time.Duration {
	n := time.Duration(buckets)
	bucket := interval
	oldest := now
	for _, t := range times {
		if t.Before(oldest) {
			oldest = t
		}
	}
	// The bucket holding now may have only begun: the others must cover
	// the span.
	if span := now.Sub(oldest); buckets > 1 && span > bucket*(n-1) {
		bucket = niceDuration(span / (n - 1))
	}
	start := now.Truncate(bucket).Add(-bucket * (n - 1))
	w.BucketSeconds = bucket.Seconds()
	w.Timeline = make([]TimelineBucket, buckets)
	for i := range w.Timeline {
		w.Timeline[i].Start = start.Add(time.Duration(i) * bucket)
	}
	for _, t := range times {
		i := int(t.Sub(start) / bucket)
		if i >= 0 && i < buckets {
			w.Timeline[i].Count++
		} else if i >= buckets {
			w.Timeline[buckets-1].Count++
		}
	}
	return bucket
}

// niceDuration rounds d up to a bucket width people read at a glance:
// one that divides a day, or whole days.
func niceDuration(d time.Duration) time.Duration {
	for _, n := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
		3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour} {
		if d <= n {
			return n
		}
	}
	const day = 24 * time.Hour
	return (d + day - 1) / day * day
}

// drawWatch draws one view. On a terminal the view is repainted from the
// top and must fit the screen, or the terminal scrolls the header (total,
// change, growth) away: the timeline gets the lines the header leaves.
func drawWatch(ios *IOStreams, ro report.Options, doc StatsDoc, times []time.Time, interval time.Duration) error {
	ro.Now = doc.AsOf
	w := doc.Watch
	repaint := ro.TTY && ro.Format != report.FormatMarkdown && ro.Format != report.FormatNDJSON
	if !repaint || ios.Height <= 0 {
		bucket := timeline(w, times, doc.AsOf, interval, timelineBuckets)
		if ro.Format == report.FormatNDJSON {
			return report.WriteNDJSON(ios.Out, doc)
		}
		return writeWatch(ios.Out, doc, bucket, ro)
	}
	var header bytes.Buffer
	if err := writeWatchHeader(&header, doc, ro); err != nil {
		return err
	}
	// Lines left: the header, a blank line, the timeline's title, and the
	// line the cursor rests on after the last bar.
	n := ios.Height - screenLines(header.String(), ro.Width) - 3
	bucket := timeline(w, times, doc.AsOf, interval, min(max(n, minTimelineBuckets), timelineBuckets))
	var view bytes.Buffer
	view.WriteString("\033[H\033[2J") // repaint from the top
	if err := writeWatch(&view, doc, bucket, ro); err != nil {
		return err
	}
	_, err := ios.Out.Write(view.Bytes())
	return err
}

// screenLines is how many terminal lines text takes at width columns,
// counting the lines the terminal wraps.
func screenLines(text string, width int) int {
	if width <= 0 {
		width = 120 // what report draws for an unknown width
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n += max(1, (lipgloss.Width(l)+width-1)/width)
	}
	return n
}

func writeWatchHeader(out io.Writer, doc StatsDoc, ro report.Options) error {
	w := doc.Watch
	var growthV any = report.Unknown{}
	if w.GrowthPerMinute != nil {
		growthV = fmt.Sprintf("%+.1f/min", *w.GrowthPerMinute)
	}
	return report.WriteFields(out, fmt.Sprintf("DLQ %s — every %s, Ctrl-C stops", doc.Source, time.Duration(w.IntervalSeconds*float64(time.Second))), []report.Field{
		{Key: "as of", Value: doc.AsOf},
		{Key: "total", Value: doc.Total},
		{Key: "change", Value: fmt.Sprintf("%+d since the last draw", w.Change)},
		{Key: "growth", Value: growthV},
		{Key: "oldest", Value: report.AgeSeconds(doc.OldestAgeSeconds)},
		{Key: "conflicts", Value: doc.Conflicts},
		{Key: "malformed", Value: doc.Malformed},
	}, ro)
}

func writeWatch(out io.Writer, doc StatsDoc, bucket time.Duration, ro report.Options) error {
	if err := writeWatchHeader(out, doc, ro); err != nil {
		return err
	}
	fmt.Fprintln(out)
	w := doc.Watch
	bars := make([]report.Bar, len(w.Timeline))
	for i, b := range w.Timeline {
		label := b.Start.Format("15:04:05")
		if !ro.TTY && ro.Format != report.FormatMarkdown {
			label = b.Start.Format(time.RFC3339) // piped: times scripts parse
		} else if bucket >= 24*time.Hour {
			label = b.Start.Format("01-02")
		} else if bucket >= time.Hour {
			label = b.Start.Format("01-02 15:04")
		}
		bars[i] = report.Bar{Label: label, Count: int64(b.Count)}
	}
	if !ro.TTY && ro.Format != report.FormatMarkdown {
		return report.WriteHistogram(out, "", bars, ro)
	}
	return report.WriteHistogram(out, fmt.Sprintf("Dead letters per %s", report.FormatAge(bucket)), bars, ro)
}
