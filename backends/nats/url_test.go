package natsdlq

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

func TestParseURL(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		raw      string
		env      map[string]string
		user     string
		password string
		token    string
		hosts    string
		display  string
	}{
		{raw: "nats://localhost?stream=DLQ", hosts: "localhost:4222", display: "nats://localhost?stream=DLQ"},
		{raw: "nats://a:1,b:2?stream=DLQ", hosts: "a:1,b:2"},
		{raw: "nats://bob:s3cret@h:4222?stream=DLQ", user: "bob", password: "s3cret", hosts: "h:4222", display: "nats://bob:xxxxx@h:4222?stream=DLQ"},
		{raw: "nats://bob@h?stream=DLQ", env: map[string]string{PasswordEnv: "fromenv"}, user: "bob", password: "fromenv", hosts: "h:4222", display: "nats://bob@h?stream=DLQ"},
		{raw: "nats://T0KEN@h?stream=DLQ", token: "T0KEN", hosts: "h:4222", display: "nats://xxxxx@h?stream=DLQ"},
		{raw: "tls://bob:p%40ss@h:4443?stream=DLQ&tls_insecure=true", user: "bob", password: "p@ss", hosts: "h:4443", display: "tls://bob:xxxxx@h:4443?stream=DLQ&tls_insecure=true"},
	} {
		u, err := parseURL(c.raw, env(c.env))
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		if u.user != c.user || u.password != c.password || u.token != c.token || strings.Join(u.hosts, ",") != c.hosts {
			t.Errorf("%s: user %q password %q token %q hosts %v", c.raw, u.user, u.password, u.token, u.hosts)
		}
		if c.display != "" && u.Display() != c.display {
			t.Errorf("%s: display %q, want %q", c.raw, u.Display(), c.display)
		}
		for _, sec := range u.Secrets() {
			if strings.Contains(u.Display(), sec) {
				t.Errorf("%s: display %q shows a secret", c.raw, u.Display())
			}
		}
		// Parsed once without the environment (as the registry does),
		// then given it, it reads the same.
		bare, err := parseURL(c.raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if late, err := bare.withEnv(env(c.env)); err != nil || !reflect.DeepEqual(late, u) {
			t.Errorf("%s: parsed, then given the environment: %+v, %v; want %+v", c.raw, late, err, u)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for raw, want := range map[string]string{
		"nats://h":                                  "no stream",
		"nats://h?stream=a.b":                       "want a JetStream stream name",
		"nats://h?stream=D&bogus=1":                 "unknown query parameter",
		"nats://h:99999?stream=D":                   "not a port number",
		"nats://h/path?stream=D":                    "unexpected path",
		"nats://u:secretpw@h?stream=D&creds=x":      "two ways",
		"nats://h?stream=D&timeout=-1s":             "positive duration",
		"redis://h?stream=D":                        "want nats://",
		"nats://h?stream=D&stream=E":                "given 2 times",
		"nats://u:secretpw@h?stream=D&advisories=x": "advisories",
	} {
		_, err := parseURL(raw, nil)
		var ce *backend.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a configuration error saying %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: error shows the password: %v", raw, err)
		}
	}
}

func TestRegistrationParseRedacts(t *testing.T) {
	p, err := Registration().Parse("nats://bob:hunter22@h?stream=DLQ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Display, "hunter22") || len(p.Secrets) != 1 || p.Secrets[0] != "hunter22" {
		t.Errorf("display %q secrets %v", p.Display, p.Secrets)
	}
}

// FuzzParseURLNeverEchoesSecret: whatever the URL, no error and no display
// form holds its password or token, raw or percent-encoded.
func FuzzParseURLNeverEchoesSecret(f *testing.F) {
	f.Add("alice", "s3cret", "stream=dlq")
	f.Add("", "p@ss:w/rd?x", "stream=a&tls_ca=/x@y")
	f.Add("0", "?", "0")
	f.Add("u", "", "stream=D&creds=/a@b")
	f.Fuzz(func(t *testing.T, user, pass, query string) {
		secret := "Q7xZ" + pass + "Zx7Q"
		for _, info := range []string{user + ":" + secret, secret, url.UserPassword(user, secret).String()} {
			for _, scheme := range []string{"nats", "tls"} {
				raw := scheme + "://" + info + "@127.0.0.1:1?" + query
				u, err := parseURL(raw, nil)
				for _, text := range []string{fmt.Sprint(err), u.Display()} {
					if strings.Contains(text, secret) || strings.Contains(text, url.PathEscape(secret)) {
						t.Fatalf("%q: %q holds the secret", raw, text)
					}
				}
			}
		}
	})
}
