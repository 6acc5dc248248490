package cmd

import (
	"errors"
	"io"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// parseOpenMetrics reads out with the Prometheus OpenMetrics 1.0 parser,
// the one a scrape or a textfile collector uses.
func parseOpenMetrics(t *testing.T, out string) map[string]*dto.MetricFamily {
	t.Helper()
	if !strings.HasSuffix(out, "# EOF\n") {
		t.Fatalf("output does not end with # EOF:\n%s", out)
	}
	dec := expfmt.NewDecoder(strings.NewReader(out), expfmt.NewFormat(expfmt.TypeOpenMetrics))
	fams := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			return fams
		}
		if err != nil {
			t.Fatalf("the Prometheus parser refused the output: %v\n%s", err, out)
		}
		fams[mf.GetName()] = &mf
	}
}

func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	mf := fams[name]
	if mf == nil {
		t.Fatalf("no %s family", name)
	}
	if mf.GetType() != dto.MetricType_GAUGE {
		t.Errorf("%s is a %v, want a gauge", name, mf.GetType())
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["source"] == "" {
			t.Errorf("%s has no source label", name)
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no %s sample with labels %v", name, labels)
	return 0
}

func TestStatsOpenMetrics(t *testing.T) {
	src := incidentSource(t)
	out, errOut, code := run(t, nil, "--source", src, "stats", "-o", "openmetrics")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	fams := parseOpenMetrics(t, out)
	for name, want := range map[string]float64{
		"dlqctl_dlq_entries": 284, "dlqctl_dlq_unique_events": 269, "dlqctl_dlq_conflicts": 3,
		"dlqctl_dlq_malformed": 8, "dlqctl_dlq_overdue": 68,
	} {
		if got := gauge(t, fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := gauge(t, fams, "dlqctl_dlq_category_entries", map[string]string{"category": "transient"}); got != 125 {
		t.Errorf("transient = %v, want 125", got)
	}
	if got := gauge(t, fams, "dlqctl_dlq_disposition_entries", map[string]string{"disposition": "resolve"}); got != 34 {
		t.Errorf("resolve = %v, want 34", got)
	}
	gauge(t, fams, "dlqctl_dlq_origin_entries", map[string]string{"origin": "orders"})
	if got := gauge(t, fams, "dlqctl_dlq_oldest_age_seconds", nil); got <= 0 {
		t.Errorf("oldest age = %v", got)
	}
}

func TestCheckOpenMetrics(t *testing.T) {
	src := incidentSource(t)
	out, _, code := run(t, nil, "--source", src, "check", "--max-total", "10", "-o", "openmetrics")
	if code != ExitCheck {
		t.Fatalf("exit %d, want %d", code, ExitCheck)
	}
	fams := parseOpenMetrics(t, out)
	if got := gauge(t, fams, "dlqctl_check_ok", nil); got != 0 {
		t.Errorf("dlqctl_check_ok = %v, want 0", got)
	}
	if got := gauge(t, fams, "dlqctl_check_violation", map[string]string{"rule": "max-total"}); got != 284 {
		t.Errorf("violation max-total = %v, want 284", got)
	}
	out, _, code = run(t, nil, "--source", src, "check", "--max-total", "1000", "-o", "openmetrics")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := gauge(t, parseOpenMetrics(t, out), "dlqctl_check_ok", nil); got != 1 {
		t.Errorf("dlqctl_check_ok = %v, want 1", got)
	}
}

// The source label never carries a password.
func TestOpenMetricsRedactsTheSource(t *testing.T) {
	doc := StatsDoc{Source: "redis://app:hunter2@127.0.0.1:6379/0?stream=dlq", ByCategory: map[string]int{}}
	var b strings.Builder
	for _, g := range statsGauges(doc) {
		for _, s := range g.Samples {
			b.WriteString(s.Labels["source"] + "\n")
		}
	}
	if strings.Contains(b.String(), "hunter2") || !strings.Contains(b.String(), "127.0.0.1") {
		t.Errorf("source labels: %s", b.String())
	}
}

func TestOpenMetricsOnlyForStatsAndCheck(t *testing.T) {
	_, errOut, code := run(t, nil, "--source", incidentSource(t), "list", "-o", "openmetrics")
	if code != ExitUsage || !strings.Contains(errOut, "for stats and check only") {
		t.Errorf("list -o openmetrics: exit %d, %s", code, errOut)
	}
}
