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
