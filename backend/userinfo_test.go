package backend

import (
	"errors"
	"testing"
)

// TestHiddenPasswordForms: a display URL's hidden password is told, left
// out (the user name stays) and filled back in, escaped; URLs without one
// are left as they are.
func TestHiddenPasswordForms(t *testing.T) {
	cases := []struct {
		display, without, filled string
		hides                    bool
	}{
		{"redis://:xxxxx@127.0.0.1:6379/0?stream=dlq", "redis://127.0.0.1:6379/0?stream=dlq", "redis://:p%40ss%2Fw%3Ard@127.0.0.1:6379/0?stream=dlq", true},
		{"amqp://guest:xxxxx@h:5672/?queue=dlq", "amqp://guest@h:5672/?queue=dlq", "amqp://guest:p%40ss%2Fw%3Ard@h:5672/?queue=dlq", true},
		{"kafka://al%40ice:xxxxx@h1:9092,h2:9092?topic=t", "kafka://al%40ice@h1:9092,h2:9092?topic=t", "kafka://al%40ice:p%40ss%2Fw%3Ard@h1:9092,h2:9092?topic=t", true},
		{"redis://127.0.0.1:6379/0?stream=a@b", "redis://127.0.0.1:6379/0?stream=a@b", "redis://127.0.0.1:6379/0?stream=a@b", false},
		{"dir:/tmp/q", "dir:/tmp/q", "dir:/tmp/q", false},
		{"amqp://guest@h/?queue=q", "amqp://guest@h/?queue=q", "amqp://guest@h/?queue=q", false},
	}
	for _, c := range cases {
		if got := HidesPassword(c.display); got != c.hides {
			t.Errorf("HidesPassword(%q) = %v", c.display, got)
		}
		if got := WithoutPassword(c.display); got != c.without {
			t.Errorf("WithoutPassword(%q) = %q, want %q", c.display, got, c.without)
		}
		if got := WithPassword(c.display, "p@ss/w:rd"); got != c.filled {
			t.Errorf("WithPassword(%q) = %q, want %q", c.display, got, c.filled)
		}
	}
	if got := WithHiddenPassword("amqp://guest@h/?queue=q"); got != "amqp://guest:xxxxx@h/?queue=q" {
		t.Errorf("WithHiddenPassword = %q", got)
	}
}

// TestScrubAroundKeepsTheDisplay: a password that equals the user name is
// scrubbed everywhere but inside the URL's display form, which hides it
// already and shows the user.
func TestScrubAroundKeepsTheDisplay(t *testing.T) {
	err := errors.New("amqp://guest:xxxxx@h:1/?queue=q: connect: login guest refused")
	got := ScrubAround(err, []string{"amqp://guest:xxxxx@h:1/?queue=q"}, "guest").Error()
	if want := "amqp://guest:xxxxx@h:1/?queue=q: connect: login xxxxx refused"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Scrub(err, "guest").Error(); got != "amqp://xxxxx:xxxxx@h:1/?queue=q: connect: login xxxxx refused" {
		t.Errorf("Scrub = %q", got)
	}
}
