package all

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

// FuzzURLParsersNeverEchoAPassword runs every registered backend's URL
// parser (and the shared redactor) over URLs that carry a password, raw or
// percent-encoded, and checks that no error, display form or redaction
// holds it.
func FuzzURLParsersNeverEchoAPassword(f *testing.F) {
	for _, seed := range [][3]string{
		{"alice", "s3cret", "stream=dlq"},
		{"", "p@ss:w/rd?x", "topic=t&admin=http://h:8080"},
		{"u", "%zz", "stream=a&tls_ca=/x"},
		{"u", "pw#frag", "password=other"},
		{"u", "a b\tc", "region=eu-west-1&endpoint=http://127.0.0.1:9324"},
		{"u:v", "x@y@z", "topic=orders.DLT"},
		{"#", "s3cret", "0"}, // a stray "#" made the rest a fragment that RedactURL printed whole
		{"u", "s3cret", "topic=t&admin=http://a:b@h:8080"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	reg := Registry()
	f.Fuzz(func(t *testing.T, user, pass, query string) {
		// A marker that the rest of the URL cannot hold by chance makes
		// "the password appears" a sound check.
		secret := "Q7xZ" + pass + "Zx7Q"
		for _, r := range reg.All() {
			for _, scheme := range r.Schemes {
				if scheme == "dir" {
					continue // dir:PATH has no user info
				}
				encoded := scheme + "://" + url.UserPassword(user, secret).String() + "@127.0.0.1:1/0?" + query
				raw := scheme + "://" + user + ":" + secret + "@127.0.0.1:1/0?" + query
				for _, u := range []string{encoded, raw} {
					check := func(what, text string) {
						if strings.Contains(text, secret) || strings.Contains(text, url.UserPassword("", secret).String()[1:]) {
							t.Fatalf("%s: %s of %q holds the password: %s", r.Name, what, u, text)
						}
					}
					p, err := r.Parse(u)
					if err != nil {
						check("Parse error", err.Error())
					} else {
						check("Parse display", p.Display)
					}
					check("Registry.Display", reg.Display(u))
					check("RedactURL", backend.RedactURL(u))
				}
			}
		}
	})
}

// queryBase is a URL of each scheme that parses, to which the fuzz adds
// one parameter. A scheme missing here fails the fuzz: every backend that
// reads a query is checked.
var queryBase = map[string]string{
	"redis": "redis://127.0.0.1:6379/0?stream=s", "rediss": "rediss://127.0.0.1:6379/0?stream=s",
	"pulsar": "pulsar://127.0.0.1:6650?topic=t", "pulsar+ssl": "pulsar+ssl://127.0.0.1:6651?topic=t",
	"kafka": "kafka://127.0.0.1:9092?topic=t", "kafkas": "kafkas://127.0.0.1:9092?topic=t",
	"sqs": "sqs://q?region=us-east-1", "https": "https://sqs.us-east-1.amazonaws.com/123456789012/q?receivers=2",
	"amqp": "amqp://127.0.0.1:5672/?queue=q", "amqps": "amqps://127.0.0.1:5671/?queue=q",
	"nats": "nats://127.0.0.1:4222?stream=s", "tls": "tls://127.0.0.1:4222?stream=s",
}

// FuzzURLParsersNeverEchoAQueryValue adds one parameter, known to some
// backend or not, to a URL of every registered scheme and checks that no
// parse error shows its value, whole or in part: a value typed under a
// mistyped key (passwrod=) or a known one may be a secret, and an error
// names the key instead. dir:PATH has no query: what follows a "?" is
// part of its path.
func FuzzURLParsersNeverEchoAQueryValue(f *testing.F) {
	keys := []string{"bogus", "passwrod", "sasl_password", "stream", "group", "cluster", "topic", "subscription", "admin", "timeout",
		"sasl", "state_topic", "region", "endpoint", "account", "receivers", "lease_settle", "queue", "heartbeat", "advisories",
		"consumer", "creds", "lease_bucket", "tls_ca", "tls_insecure", "tls_server_name", "tls_hostname_verification", "max_message_size"}
	for _, k := range keys {
		for _, v := range []string{"SECRET7", "a b/c?d", "%zz", "x@y", "-1", "1;2", "http://u:pw@h:1", "", "99999999999999999999"} {
			f.Add(k, v)
		}
	}
	reg := Registry()
	f.Fuzz(func(t *testing.T, key, value string) {
		const pre, post = "Q7xZ", "Zx7Q"
		if strings.Contains(key, pre) || strings.Contains(key, post) {
			return // keys are shown; the marker must be the value's alone
		}
		marker := pre + value + post
		for _, r := range reg.All() {
			for _, scheme := range r.Schemes {
				if scheme == "dir" {
					continue
				}
				base, ok := queryBase[scheme]
				if !ok {
					t.Fatalf("%s: no base URL for scheme %s in queryBase", r.Name, scheme)
				}
				urls := []string{base + "&" + url.QueryEscape(key) + "=" + url.QueryEscape(marker)}
				if !strings.ContainsAny(key+value, "&#") {
					urls = append(urls, base+"&"+key+"="+marker)
				}
				for _, u := range urls {
					if _, err := r.Parse(u); err != nil && (strings.Contains(err.Error(), pre) || strings.Contains(err.Error(), post)) {
						t.Fatalf("%s: the parse error of %q shows the value of %q: %v", r.Name, u, key, err)
					}
				}
			}
		}
	})
}
