package cmd

import (
	"strings"
	"testing"
)

// dlq init on a backend that keeps its own dead letters, or without a
// URL, is a usage error that says why.
func TestDLQInitRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "init"}, "needs a URL"},
		{[]string{"dlq", "init", "dir:" + t.TempDir()}, "nothing to create"},
		{[]string{"dlq", "init", "nats://127.0.0.1:1?stream=ORDERS&bogus=1"}, "unknown query parameter"},
	} {
		_, stderr, code := run(t, nil, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 saying %q\n%s", c.args, code, c.want, stderr)
		}
	}
}
