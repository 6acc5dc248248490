package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// pwURL is a parsed URL that holds a password.
type pwURL struct{ host, password string }

func (u pwURL) Display() string   { return "pw://" + u.host }
func (u pwURL) Secrets() []string { return []string{u.password} }

// TestFactoryParsesOnce: Open gets the very value Parse made, and a parse
// error is scrubbed of the password read before the mistake.
func TestFactoryParsesOnce(t *testing.T) {
	parses := 0
	f := NewFactory(func(raw string) (pwURL, error) {
		parses++
		host, pw, _ := strings.Cut(strings.TrimPrefix(raw, "pw://"), "!")
		u := pwURL{host: host, password: pw}
		if strings.HasSuffix(host, "bad") {
			return u, Configf("host %s: bad (password %s)", host, pw)
		}
		return u, nil
	}, func(_ context.Context, u pwURL, _ OpenOptions) (Source, error) {
		return nil, errors.New("opened " + u.host)
	})
	p, err := f.Parse("pw://h1!s3cret")
	if err != nil || p.Display != "pw://h1" || len(p.Secrets) != 1 || p.Secrets[0] != "s3cret" {
		t.Fatalf("Parse = %+v, %v", p, err)
	}
	if _, err := f.Open(context.Background(), p, OpenOptions{}); err == nil || err.Error() != "opened h1" || parses != 1 {
		t.Errorf("Open = %v after %d parses; want it to open what Parse found, parsed once", err, parses)
	}
	_, err = f.Parse("pw://bad!s3cret")
	var ce *ConfigError
	if err == nil || strings.Contains(err.Error(), "s3cret") || !errors.As(err, &ce) {
		t.Errorf("Parse of a bad URL = %v; want a ConfigError without the password", err)
	}
	if _, err := f.Open(context.Background(), Parsed{Config: "something else"}, OpenOptions{}); err == nil {
		t.Error("Open of a Parsed that its Parse did not make succeeded")
	}
}
