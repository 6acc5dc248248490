package kafkadlq

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

func TestParseURLPreamble(t *testing.T) {
	u, err := parseURL("kafkas://al%40ice:pw%3Fx@h1:9092,h2:9093/?topic=orders.DLT&tls_ca=/ca.pem&tls_insecure=true&tls_server_name=k.test&timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	if u.user != "al@ice" || u.password != "pw?x" || strings.Join(u.brokers, ",") != "h1:9092,h2:9093" || u.mechanism != "plain" ||
		u.stateTopic != "orders.DLT.dlqctl-state" || u.tlsCA != "/ca.pem" || !u.tlsInsecure || u.tlsServerName != "k.test" || u.timeout.String() != "5s" {
		t.Fatalf("%+v", u)
	}
	// The user name is escaped as user info, so an '@' in it cannot read
	// as the end of the user info.
	if d := u.Display(); !strings.HasPrefix(d, "kafkas://al%40ice:xxxxx@h1:9092,h2:9093?") || strings.Contains(d, "pw") {
		t.Errorf("display %q", d)
	}
	for raw, want := range map[string]string{
		"kafka://h:9092?topic=x&topic=y":            `query parameter "topic" given 2 times`,
		"kafka://h:9092?topic=x&tls_insecure=false": "tls_insecure needs kafkas:// (TLS)",
		"kafka://h:9092?topic=x&timeout=0s":         `timeout=xxxxx: want a positive duration`,
		"kafkas://h:9092?topic=x&tls_insecure=no":   `tls_insecure=xxxxx: want true or false`,
		"kafka://:pw99xx@h:9092?topic=x":            "the user name is empty",
		"kafka://u:pw99xx%zz@h:9092?topic=x":        "the password is badly escaped",
		"kafka://h:9092?topic=x&state_topic=x":      "state_topic must differ from topic",
		"kafka://u:pw99xx@?topic=x":                 "no broker address",
		"kafka://h:9092/x?topic=x":                  `broker "h:9092/x": bad port`,
		"redis://h:9092?topic=x":                    "want kafka://host:port?topic=DLQ",
		"kafka://h:9092?topic=x&password=pw99xx":    `unknown query parameter "password" (known: copy, group, sasl, state_topic, timeout, tls_ca, tls_insecure, tls_server_name, topic)`,
	} {
		_, err := parseURL(raw)
		var ce *backend.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a configuration error saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw99xx") {
			t.Errorf("%s: the error shows the password: %v", raw, err)
		}
	}
}
