package rabbitmq

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		raw                 string
		host, vhost, queue  string
		user, pass, admin   string
		display, errContain string
	}{
		{raw: "amqp://h?queue=q", host: "h:5672", vhost: "/", queue: "q", display: "amqp://h:5672/?queue=q"},
		{raw: "amqps://h/?queue=q", host: "h:5671", vhost: "/", queue: "q"},
		{raw: "amqp://u:p%40ss@h:1/prod?queue=orders.dlq&admin=http://h:15672", host: "h:1", vhost: "prod", queue: "orders.dlq",
			user: "u", pass: "p@ss", admin: "http://h:15672", display: "amqp://u:xxxxx@h:1/prod?admin=http%3A%2F%2Fh%3A15672&queue=orders.dlq"},
		{raw: "amqp://h/%2F?queue=q", host: "h:5672", vhost: "/", queue: "q"},
		{raw: "amqp://h/a%2Fb?queue=q", host: "h:5672", vhost: "a/b", queue: "q"},
		{raw: "amqp://h/a@b?queue=q", host: "h:5672", vhost: "a@b", queue: "q"}, // an '@' in the vhost is no user info
		{raw: "amqp://h:1/v", errContain: "queue= is required"},
		{raw: "amqp://h/?queue=q&queue=r", errContain: `query parameter "queue" given 2 times`},
		{raw: "amqp://h:1/v?queue=q&x=1", errContain: `unknown query parameter "x"`},
		{raw: "amqp://h:99999/?queue=q", errContain: "bad port"},
		{raw: "amqp://h/?queue=q&tls_ca=/x", errContain: "tls_ca needs amqps://"},
		{raw: "amqp://h/?queue=q&admin=ftp://x", errContain: "admin="},
		{raw: "amqp://h/?queue=q&heartbeat=-1s", errContain: "heartbeat="},
		{raw: "amqp://h/?queue=amq.foo", errContain: "not a queue name"},
		{raw: "redis://h/?queue=q", errContain: "want amqp://"},
		{raw: "amqp://u:s3cret@/?queue=q", errContain: "no broker address"},
	} {
		s, err := parseURL(c.raw)
		if c.errContain != "" {
			var ce *backend.ConfigError
			if err == nil || !strings.Contains(err.Error(), c.errContain) || !errors.As(err, &ce) {
				t.Errorf("%s: err %v, want a config error containing %q", c.raw, err, c.errContain)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: error holds the password: %v", c.raw, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		if s.host != c.host || s.vhost != c.vhost || s.queue != c.queue || s.user != c.user || s.password != c.pass || s.admin != c.admin {
			t.Errorf("%s: got %+v", c.raw, s)
		}
		if c.display != "" && s.Display() != c.display {
			t.Errorf("%s: display %q, want %q", c.raw, s.Display(), c.display)
		}
	}
}

func TestDisplayHidesAdminPassword(t *testing.T) {
	s, err := parseURL("amqp://u:one@h/?queue=q&admin=http://adm:tw0pass@h:15672")
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Display(); strings.Contains(d, "one") || strings.Contains(d, "tw0pass") {
		t.Errorf("display holds a password: %s", d)
	}
	if got := s.adminSecrets(); len(got) == 0 || got[0] != "tw0pass" {
		t.Errorf("adminSecrets = %v", got)
	}
	a := newAdminClient(s)
	if a.user != "adm" || a.pass != "tw0pass" || strings.Contains(a.base, "tw0pass") {
		t.Errorf("admin client takes its own credentials: %+v", a)
	}
}

func TestPasswordFromEnvOrProfile(t *testing.T) {
	o := backend.OpenOptions{Getenv: func(k string) string {
		if k == "DLQCTL_AMQP_PASSWORD" {
			return "fromenv"
		}
		return ""
	}, Secret: func(k string) string { return "fromprofile" }}
	if got := password(o); got != "fromenv" {
		t.Errorf("password = %q, want the env's", got)
	}
	o.Getenv = func(string) string { return "" }
	if got := password(o); got != "fromprofile" {
		t.Errorf("password = %q, want the profile's", got)
	}
}
