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
