package cmd

import "testing"

// TestTrimNotice: the refusal of a missing DLQ keeps what each backend's
// notice names (the URL, with its port, and what does not exist) and drops
// only the "reads as empty" advice that --allow-missing replaces.
func TestTrimNotice(t *testing.T) {
	for notice, want := range map[string]string{
		`kafka://127.0.0.1:9092?topic=typo: topic "typo" does not exist: it reads as empty`:                       `kafka://127.0.0.1:9092?topic=typo: topic "typo" does not exist`,
		`stream "dlq" does not exist on redis://h:6379/0?stream=dlq: reading it as an empty DLQ (check ?stream=)`: `stream "dlq" does not exist on redis://h:6379/0?stream=dlq`,
		`nats://h:4222?stream=S: the advisory stream "A" does not exist: it reads as empty (dlqctl dlq init …)`:   `nats://h:4222?stream=S: the advisory stream "A" does not exist`,
		`something else entirely`: `something else entirely`,
	} {
		if got := trimNotice(notice); got != want {
			t.Errorf("trimNotice(%q) = %q, want %q", notice, got, want)
		}
	}
}
