package pulsardlq

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

func TestParseURLDefaults(t *testing.T) {
	for _, tc := range []struct {
		raw, service, admin, topic, sub string
	}{
		{"pulsar://broker?topic=orders-sub-DLQ", "pulsar://broker:6650", "http://broker:8080",
			"persistent://public/default/orders-sub-DLQ", "dlqctl"},
		{"pulsar+ssl://broker?topic=acme/payments/dlq&subscription=ops", "pulsar+ssl://broker:6651", "https://broker:8443",
			"persistent://acme/payments/dlq", "ops"},
		{"pulsar://10.0.0.1:16650?topic=persistent://t/n/x&admin=http://admin.internal:18080", "pulsar://10.0.0.1:16650",
			"http://admin.internal:18080", "persistent://t/n/x", "dlqctl"},
	} {
		u, err := parseURL(tc.raw)
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if u.serviceURL() != tc.service || u.admin.String() != tc.admin || u.topic.String() != tc.topic || u.subscription != tc.sub {
			t.Errorf("%s: service %s admin %s topic %s sub %s", tc.raw, u.serviceURL(), u.admin, u.topic, u.subscription)
		}
	}
	if u, _ := parseURL("pulsar://broker?topic=dlq"); u.Display() != "pulsar://broker:6650?topic=dlq" {
		t.Errorf("display = %s", u.Display())
	}
	if got := (topicName{"a", "b", "c d"}).adminPath(); got != "/admin/v2/persistent/a/b/c%20d" {
		t.Errorf("admin path = %s", got)
	}
}

func TestParseURLErrors(t *testing.T) {
	for raw, want := range map[string]string{
		"http://broker?topic=dlq":                                    `unknown scheme "http"`,
		"pulsar://u:s3cretpw@broker?topic=dlq":                       "user info in the URL is not supported",
		"pulsar://broker/x?topic=dlq":                                `unexpected path "/x"`,
		"pulsar://0/:s3cretpw@broker?topic=dlq":                      "unexpected path (not shown",
		"pulsar://broker:0?topic=dlq":                                `bad port "0"`,
		"pulsar://broker?topic=dlq&token=s3cretpw":                   `unknown query parameter "token" (known: admin, subscription, timeout, tls_ca, tls_hostname_verification, tls_insecure, topic)`,
		"pulsar://broker?topic=dlq&topic=x":                          `query parameter "topic" given 2 times`,
		"pulsar://broker?topic=dlq&admin=http://a:s3cretpw@h:8080":   "admin URL with user info is not supported",
		"pulsar://broker?topic=dlq&admin=ftp://h":                    "admin=xxxxx: want http://HOST:PORT",
		"pulsar://broker?subscription=s":                             "no topic",
		"pulsar://broker?topic=a/b":                                  "want NAME, TENANT/NAMESPACE/NAME",
		"pulsar://broker?topic=dlq&subscription=":                    "subscription is empty",
		"pulsar://broker?topic=dlq&timeout=0s":                       `timeout=xxxxx: want a positive duration`,
		"pulsar+ssl://broker?topic=dlq&tls_insecure=maybe":           `tls_insecure=xxxxx: want true or false`,
		"pulsar://broker?topic=dlq&tls_ca=/ca.pem":                   "tls_ca needs pulsar+ssl:// (TLS)",
		"pulsar://broker?topic=dlq&tls_hostname_verification=true":   "tls_hostname_verification needs pulsar+ssl:// (TLS)",
		"pulsar+ssl://broker?topic=dlq&tls_hostname_verification=no": `tls_hostname_verification=xxxxx: want true or false`,
	} {
		_, err := parseURL(raw)
		var ce *backend.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a configuration error saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("%s: the error shows the secret: %v", raw, err)
		}
	}
	u, err := parseURL("pulsar+ssl://broker?topic=dlq&tls_ca=/ca.pem&tls_insecure=true&tls_hostname_verification=true&timeout=5s")
	if err != nil || u.tlsCA != "/ca.pem" || !u.tlsInsecure || !u.tlsHostname || u.timeout.String() != "5s" {
		t.Errorf("TLS options: %+v %v", u, err)
	}
}

func TestCursor(t *testing.T) {
	st := internalStats{LastConfirmedEntry: "7:4"}
	st.Ledgers = append(st.Ledgers,
		struct {
			LedgerID int64 `json:"ledgerId"`
			Entries  int64 `json:"entries"`
		}{5, 10},
		struct {
			LedgerID int64 `json:"ledgerId"`
			Entries  int64 `json:"entries"`
		}{7, 0})
	st.Cursors = map[string]struct {
		MarkDeletePosition          string `json:"markDeletePosition"`
		IndividuallyDeletedMessages string `json:"individuallyDeletedMessages"`
	}{"dlqctl": {"5:2", "[(5:3..5:5],(5:9..7:1]]"}}
	c, err := newCursor(st, "dlqctl")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[position]bool{
		{5, 0}: false, {5, 2}: false, {5, 3}: true, {5, 4}: false, {5, 5}: false, {5, 6}: true,
		{5, 9}: true, {7, 0}: false, {7, 1}: false, {7, 2}: true, {7, 4}: true, {7, 5}: false, {6, 0}: false,
	} {
		if got := c.pending(p); got != want {
			t.Errorf("pending(%s) = %v, want %v", p, got, want)
		}
	}
	if _, err := newCursor(st, "other"); err == nil {
		t.Error("a missing subscription was not noticed")
	}
	for s, ok := range map[string]bool{"1:2:-1:-1": true, "1:2:3": true, "1:2": false, "a:b:c:d": false, "1:2:-2:0": false, "-1:0:-1:-1": false} {
		if _, got := parseMsgID(s); got != ok {
			t.Errorf("parseMsgID(%q) ok = %v", s, got)
		}
	}
}
