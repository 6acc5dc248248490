package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fake is a registration that serves schemes and, when claim is set, only
// the URLs it says yes to.
func fake(name string, claim func(string) bool, schemes ...string) Registration {
	return Registration{Name: name, Schemes: schemes, Claims: claim,
		Factory: NewFactory(parseFake, func(context.Context, fakeURL, OpenOptions) (Source, error) { return nil, nil })}
}

func hostIs(suffix string) func(string) bool {
	return func(raw string) bool {
		rest, _ := strings.CutPrefix(raw, "https://")
		host, _, _ := strings.Cut(rest, "/")
		return strings.HasSuffix(host, suffix)
	}
}

func lookupName(t *testing.T, r *Registry, raw string) string {
	t.Helper()
	reg, err := r.Lookup(raw)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", raw, err)
	}
	return reg.Name
}

func TestLookupBySchemeAndClaim(t *testing.T) {
	r := NewRegistry()
	r.Register(fake("dir", nil, "dir"))
	r.Register(fake("web", nil, "https"))
	r.Register(fake("sqs", hostIs(".amazonaws.com"), "sqs", "https"))
	for raw, want := range map[string]string{
		"dir:/var/q":                    "dir",
		"sqs://orders?region=eu-west-1": "sqs",
		"https://sqs.eu-west-1.amazonaws.com/123456789012/orders": "sqs",
		"https://queue.example.com/orders":                        "web",
	} {
		if got := lookupName(t, r, raw); got != want {
			t.Errorf("Lookup(%s) = %s, want %s", raw, got, want)
		}
	}
	// Registration order does not matter: a claiming backend is asked
	// before the one that takes the rest.
	r2 := NewRegistry()
	r2.Register(fake("sqs", hostIs(".amazonaws.com"), "https"))
	r2.Register(fake("web", nil, "https"))
	if got := lookupName(t, r2, "https://sqs.us-east-1.amazonaws.com/123456789012/q"); got != "sqs" {
		t.Errorf("claimed URL went to %s", got)
	}
	if got := lookupName(t, r2, "https://example.com/q"); got != "web" {
		t.Errorf("unclaimed URL went to %s", got)
	}
}

// A scheme's only backend gets every URL of it, claimed or not, so that
// its parser says what is wrong (SQS names the hosts it reads).
func TestLookupSoleBackendGetsUnclaimed(t *testing.T) {
	r := NewRegistry()
	r.Register(fake("sqs", hostIs(".amazonaws.com"), "sqs", "https"))
	if got := lookupName(t, r, "https://example.com/q"); got != "sqs" {
		t.Errorf("got %s", got)
	}
}

func TestLookupNoneClaims(t *testing.T) {
	r := NewRegistry()
	r.Register(fake("a", hostIs(".a.test"), "https"))
	r.Register(fake("b", hostIs(".b.test"), "https"))
	if got := lookupName(t, r, "https://x.b.test/q"); got != "b" {
		t.Errorf("got %s", got)
	}
	_, err := r.Lookup("https://user:hunter2@c.test/q")
	if err == nil || !strings.Contains(err.Error(), "a, b") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v, want one naming a and b, without the password", err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("err %T is not a configuration error", err)
	}
}

func TestLookupUnknownScheme(t *testing.T) {
	r := NewRegistry()
	r.Register(fake("dir", nil, "dir"))
	r.Register(fake("redis", nil, "redis"))
	if _, err := r.Lookup("kafka://b:9092?topic=t"); err == nil || !strings.Contains(err.Error(), `unknown scheme "kafka"`) || !strings.Contains(err.Error(), "redis://") {
		t.Errorf("err = %v", err)
	}
	if _, err := r.Lookup("/var/q"); err == nil || !strings.Contains(err.Error(), "write dir:/var/q") {
		t.Errorf("bare path: err = %v", err)
	}
}

func TestRegisterTwoTakersPanics(t *testing.T) {
	r := NewRegistry()
	r.Register(fake("a", nil, "https"))
	r.Register(fake("b", hostIs(".b.test"), "https")) // a claimer may join
	defer func() {
		if recover() == nil {
			t.Error("a second backend taking every https URL did not panic")
		}
	}()
	r.Register(fake("c", nil, "https"))
}
