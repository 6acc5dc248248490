package pulsardlq_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
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

// TestRedriveNeverWritesIntoBookkeeping: a dead letter of another DLQ can
// name any topic as its origin. A redrive must not write into any DLQ's
// removal record (its message would count as dlqctl's), nor into any topic
// marked as dlqctl's bookkeeping, whatever its name.
func TestRedriveNeverWritesIntoBookkeeping(t *testing.T) {
	c := client(t)
	a, aOrigin := freshTopic(t, ""), freshTopic(t, "")
	deadLetters(t, c, a, aOrigin, "A", 1)
	ta := open(t, a, pulsardlq.Options{})
	move(t, ta, planItems(t, ta), backend.Markers{RunID: "a", ProducerName: fmt.Sprintf("dlqctl-a-%d", time.Now().UnixNano())})
	marked := freshTopic(t, "")
	adminDo(t, http.MethodPut, adminPath(marked), `{"dlqctl-bookkeeping":"removal record of elsewhere"}`)

	b := freshTopic(t, "")
	produce(t, c, b, false,
		&pulsar.ProducerMessage{Payload: []byte("1"), Properties: map[string]string{"REAL_TOPIC": a + "-dlqctl-removed", "event_id": "B-1"}},
		&pulsar.ProducerMessage{Payload: []byte("2"), Properties: map[string]string{"REAL_TOPIC": marked, "event_id": "B-2"}},
		&pulsar.ProducerMessage{Payload: []byte("3"), Properties: map[string]string{"REAL_TOPIC": a + "-not-created-dlqctl-removed-partition-1", "event_id": "B-3"}})
	tb := open(t, b, pulsardlq.Options{})
	for _, it := range planItems(t, tb) {
		err := tb.GuardDestination(testCtx(t), it.Dest)
		if err == nil || !strings.Contains(err.Error(), "bookkeeping") {
			t.Errorf("%s: redrive to %s: %v, want a refusal naming dlqctl's bookkeeping", it.EventID, it.Dest, err)
		}
	}
}
