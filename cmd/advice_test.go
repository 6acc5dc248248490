package cmd

import (
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/redrive"
)

// TestPrintedCommandsNameThePasswordVariable: for a plan whose source or
// effects URL hides a password, the printed command gives the URL without
// it and a note names the backend's variable (RabbitMQ's guest:guest
// too); a URL without a password is printed as it is, with no note.
func TestPrintedCommandsNameThePasswordVariable(t *testing.T) {
	f, _ := optionsFactory(nil)
	lines := commandLines{global: f.Global, backends: f.Backends}
	cases := []struct{ source, arg, env string }{
		{"redis://:xxxxx@127.0.0.1:6379/0?stream=dlq", "redis://127.0.0.1:6379/0?stream=dlq", "DLQCTL_REDIS_PASSWORD"},
		{"amqp://guest:xxxxx@127.0.0.1:5672/?queue=dlq", "amqp://guest@127.0.0.1:5672/?queue=dlq", "DLQCTL_AMQP_PASSWORD"},
		{"nats://alice:xxxxx@127.0.0.1:4222?stream=DLQ", "nats://alice@127.0.0.1:4222?stream=DLQ", "DLQCTL_NATS_PASSWORD"},
		{"kafka://alice:xxxxx@127.0.0.1:9092?topic=t.DLT", "kafka://alice@127.0.0.1:9092?topic=t.DLT", "DLQCTL_KAFKA_PASSWORD"},
		{"redis://127.0.0.1:6379/0?stream=dlq", "redis://127.0.0.1:6379/0?stream=dlq", ""},
	}
	for _, c := range cases {
		p := &redrive.Plan{Source: c.source, Params: redrive.Params{Effects: "postgres://app:xxxxx@db/orders"}}
		if got := lines.sourceArg(c.source); got != c.arg {
			t.Errorf("sourceArg(%s) = %q, want %q", c.source, got, c.arg)
		}
		notes := strings.Join(lines.secretNotes(p), "\n")
		if c.env != "" && !strings.Contains(notes, "set "+c.env+" to the source's password first") {
			t.Errorf("%s: notes %q name no %s", c.source, notes, c.env)
		}
		if c.env == "" && strings.Contains(notes, "source's password") {
			t.Errorf("%s: a note for a source without a password: %q", c.source, notes)
		}
		if !strings.Contains(notes, "set DLQCTL_EFFECTS_PASSWORD to the effects store's password first") {
			t.Errorf("notes %q do not name DLQCTL_EFFECTS_PASSWORD", notes)
		}
		if strings.Contains(notes, "xxxxx") {
			t.Errorf("a note shows a hidden URL: %q", notes)
		}
	}
	if got := effectsArg("postgres://app:xxxxx@db/orders"); got != "postgres://app@db/orders" {
		t.Errorf("effectsArg = %q", got)
	}
}
