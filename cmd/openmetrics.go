package cmd

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/report"
)

// statsGauges are the DLQ gauges of stats and check -o openmetrics, each
// labelled with the source (its password hidden) so that one textfile
// collector can hold several DLQs.
func statsGauges(doc StatsDoc) []report.Gauge {
	src := map[string]string{"source": backend.RedactURL(doc.Source)}
	with := func(k, v string) map[string]string {
		return map[string]string{"source": src["source"], k: v}
	}
	one := func(name, help string, v float64) report.Gauge {
		return report.Gauge{Name: name, Help: help, Samples: []report.Sample{{Labels: src, Value: v}}}
	}
	per := func(name, help, label string, counts map[string]int) report.Gauge {
		g := report.Gauge{Name: name, Help: help}
		for _, k := range sortedKeys(counts) {
			g.Samples = append(g.Samples, report.Sample{Labels: with(label, k), Value: float64(counts[k])})
		}
		return g
	}
	gs := []report.Gauge{
		one("dlqctl_dlq_entries", "Entries in the DLQ.", float64(doc.Total)),
		one("dlqctl_dlq_unique_events", "Distinct event IDs among decodable entries.", float64(doc.UniqueEvents)),
		per("dlqctl_dlq_category_entries", "Entries per category.", "category", doc.ByCategory),
		per("dlqctl_dlq_disposition_entries", "Entries per disposition.", "disposition", doc.ByDisposition),
		per("dlqctl_dlq_origin_entries", "Entries per origin topic or stream.", "origin", doc.ByOrigin),
	}
	oldest := report.Gauge{Name: "dlqctl_dlq_oldest_age_seconds", Help: "Age of the oldest entry; absent when no entry has a dead-letter time."}
	if doc.OldestAgeSeconds != nil {
		oldest.Samples = []report.Sample{{Labels: src, Value: float64(*doc.OldestAgeSeconds)}}
	}
	left := report.Gauge{Name: "dlqctl_dlq_source_retention_seconds", Help: "How long each source log still holds its oldest header-only entry's record, at the soonest; no sample for a log that keeps records for ever."}
	for _, r := range doc.SourceRetention {
		if r.LeftSeconds != nil {
			left.Samples = append(left.Samples, report.Sample{Labels: with("log", r.Source), Value: float64(*r.LeftSeconds)})
		}
	}
	return append(gs, oldest,
		one("dlqctl_dlq_conflicts", "Event IDs with more than one fingerprint.", float64(doc.Conflicts)),
		one("dlqctl_dlq_malformed", "Entries that could not be decoded.", float64(doc.Malformed)),
		one("dlqctl_dlq_source_gone", "Malformed entries whose source no longer holds their payload.", float64(doc.SourceGone)),
		left,
		one("dlqctl_dlq_overdue", "Entries past their recover_by deadline.", float64(doc.Overdue)),
	)
}

// checkGauges adds the check result to the DLQ gauges.
func checkGauges(stats StatsDoc, doc CheckDoc) []report.Gauge {
	src := backend.RedactURL(stats.Source)
	ok := 0.0
	if doc.OK {
		ok = 1
	}
	gs := append(statsGauges(stats), report.Gauge{Name: "dlqctl_check_ok", Help: "1 when no threshold was breached, else 0.",
		Samples: []report.Sample{{Labels: map[string]string{"source": src}, Value: ok}}})
	v := report.Gauge{Name: "dlqctl_check_violation", Help: "The value found for each breached threshold."}
	for _, x := range doc.Violations {
		v.Samples = append(v.Samples, report.Sample{Labels: map[string]string{"source": src, "rule": x.Rule}, Value: float64(x.Actual)})
	}
	return append(gs, v)
}
