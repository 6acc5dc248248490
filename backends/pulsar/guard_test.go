package pulsardlq_test

import (
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/pulsar"
)

// The DLQ itself (under any spelling, any partition), dlqctl's removal
// record, and a topic in a tenant or namespace that does not exist are
// refused as destinations, each saying why; a topic not created yet in a
// namespace that exists is a valid destination.
func TestGuardDestination(t *testing.T) {
	dlq := freshTopic(t, "")
	tp := open(t, dlq, pulsardlq.Options{})
	local := dlq[strings.LastIndex(dlq, "/")+1:]
	for _, c := range []struct {
		dest, says string
	}{
		{dlq, "this DLQ's own topic"},
		{local, "this DLQ's own topic"},
		{"public/default/" + local, "this DLQ's own topic"},
		{dlq + "-partition-2", "this DLQ's own topic"},
		{dlq + "-dlqctl-removed", "record of removed entries"},
		{"persistent://no-such-tenant/default/orders", "namespace no-such-tenant/default does not exist on the broker (tenant no-such-tenant does not exist either)"},
		{"persistent://public/no-such-ns/orders", "namespace public/no-such-ns does not exist on the broker (tenant public exists)"},
		{"non-persistent://public/default/orders", "only persistent://"},
		{"persistent://public/default/" + local + "-orders-not-created-yet", ""},
	} {
		err := tp.GuardDestination(testCtx(t), c.dest)
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%s: refused (%v), want allowed", c.dest, err)
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%s: %v, want a refusal saying %q", c.dest, err, c.says)
		}
	}
}
