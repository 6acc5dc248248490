package cmd

import (
	"strings"
	"testing"
)

// A backend whose order key is fixed refuses --key-from (exit 2) rather
// than reading with another key than the one asked for.
func TestKeyFromRefusedWhereNotTaken(t *testing.T) {
	_, stderr, code := run(t, nil, "--source", incidentSource(t), "--key-from", "header:tenant", "stats")
	if code != ExitUsage || !strings.Contains(stderr, "--key-from") || !strings.Contains(stderr, "takes no --key-from (only RabbitMQ)") {
		t.Errorf("exit %d, want %d naming --key-from and the backends that take it:\n%s", code, ExitUsage, stderr)
	}
	if _, stderr, code := run(t, nil, "--source", incidentSource(t), "stats"); code != 0 {
		t.Errorf("without --key-from: exit %d\n%s", code, stderr)
	}
}

// A resume reads the DLQ with the same order key as the run it continues.
func TestResumeCommandRepeatsKeyFrom(t *testing.T) {
	lines := commandLines{global: GlobalOptions{EventIDFrom: "header:id", KeyFrom: "header:tenant id"}}
	got := lines.resumeCommand("redrive", "j.jsonl", hintFlags{})
	if !strings.Contains(got, "--key-from 'header:tenant id'") || !strings.Contains(got, "--event-id-from header:id") {
		t.Errorf("resume command %q does not repeat --key-from and --event-id-from", got)
	}
}
