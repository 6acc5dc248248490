// Package effectstest holds what the tests of every effects store check
// alike.
package effectstest

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

// PlainError checks err is what a store that cannot be reached (or that
// refuses its credentials) returns: an error saying want, not a
// *backend.ConfigError (it is no mistake in the URL), that does not carry
// the secret.
func PlainError(t testing.TB, err error, secret, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var ce *backend.ConfigError
	if errors.As(err, &ce) {
		t.Errorf("err = %v is a ConfigError; a store that cannot be reached is no mistake in the URL", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q", err, want)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("err = %q carries the password", err)
	}
}

// ConfigError checks err is what a URL or option wrong as written gives:
// a *backend.ConfigError saying want, that does not carry the secret.
func ConfigError(t testing.TB, err error, secret, want string) {
	t.Helper()
	var ce *backend.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("err = %v (%T), want a *backend.ConfigError", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q", err, want)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("err = %q carries the password", err)
	}
}
