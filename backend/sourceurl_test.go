package backend

import (
	"strings"
	"testing"
	"time"
)

func TestSplitSourceURL(t *testing.T) {
	schemes := []string{"kafka", "kafkas"}
	for _, c := range []struct {
		raw      string
		withPath bool
		want     SourceURL
	}{
		{"kafka://h:1?topic=x", false, SourceURL{Scheme: "kafka", Hosts: "h:1", RawQuery: "topic=x"}},
		{"kafkas://al%40ice:p%3Fw@h1:1,h2:2", false, SourceURL{Scheme: "kafkas", User: "al@ice", Password: "p?w", HasUser: true, HasPassword: true, Hosts: "h1:1,h2:2"}},
		{"kafka://u:p/w@x@h/?q", false, SourceURL{Scheme: "kafka", User: "u", Password: "p/w@x", HasUser: true, HasPassword: true, Hosts: "h/", RawQuery: "q"}},
		{"kafka://tok@h", false, SourceURL{Scheme: "kafka", User: "tok", HasUser: true, Hosts: "h"}},
		{"kafka://:pw@h", false, SourceURL{Scheme: "kafka", Password: "pw", HasUser: true, HasPassword: true, Hosts: "h"}},
		{"kafka://h/v@x?q=1", true, SourceURL{Scheme: "kafka", Hosts: "h", Path: "/v@x", RawQuery: "q=1"}},
		{"kafka://u:p@h/v", true, SourceURL{Scheme: "kafka", User: "u", Password: "p", HasUser: true, HasPassword: true, Hosts: "h", Path: "/v"}},
	} {
		got, ok, err := SplitSourceURL(c.raw, schemes, c.withPath)
		if !ok || err != nil || got != c.want {
			t.Errorf("%s: %+v %v %v, want %+v", c.raw, got, ok, err, c.want)
		}
	}
	for _, raw := range []string{"redis://h", "kafka:h", "h:1"} {
		if _, ok, err := SplitSourceURL(raw, schemes, false); ok || err != nil {
			t.Errorf("%s: ok %v err %v, want not ok", raw, ok, err)
		}
	}
	for raw, want := range map[string]string{
		"kafka://u%zz:Secret1@h": "user name is badly escaped",
		"kafka://u:Secret1%zz@h": "password is badly escaped",
	} {
		_, ok, err := SplitSourceURL(raw, schemes, false)
		if !ok || err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Secret1") {
			t.Errorf("%s: ok %v err %v, want %q without the password", raw, ok, err, want)
		}
	}
}

func TestQuoteURLPiece(t *testing.T) {
	for _, c := range []struct {
		raw     string
		hasUser bool
		shown   bool
	}{
		{"redis://h:1/0?stream=x", false, true},
		{"redis://u:pw@h:1/0?stream=x", true, true},
		{"redis://0/:pw@h:1/0", false, false},       // the password ran into the path
		{"kafka://u:p?w@h:1?topic=x", false, false}, // into the query
		{"kafka://u:p@w@h:1", true, false},
	} {
		got := QuoteURLPiece(c.raw, c.hasUser, "piece")
		if (got == `"piece"`) != c.shown || StrayAt(c.raw, c.hasUser) == c.shown {
			t.Errorf("%s: %s", c.raw, got)
		}
	}
}

func TestUserinfoDisplay(t *testing.T) {
	for _, c := range []struct {
		user    string
		hasPass bool
		want    string
	}{
		{"bob", true, "bob:xxxxx@"},
		{"bob", false, "bob@"},
		{"", false, ""},
		{"a@b", true, "a%40b:xxxxx@"},
	} {
		if got := UserinfoDisplay(c.user, c.hasPass); got != c.want {
			t.Errorf("%q %v: %q, want %q", c.user, c.hasPass, got, c.want)
		}
	}
}

func TestParseURLQueryRefuses(t *testing.T) {
	known := []string{"topic", "timeout"}
	for raw, want := range map[string]string{
		"topic=x&password=hunter2&zz=1":   `unknown query parameter "password" (known: timeout, topic)`,
		"topic=x&topic=hunter2":           `query parameter "topic" given 2 times`,
		"topic=hunter2%zz":                `bad query string: the value of "topic" is badly escaped (write a literal '%' as %25)`,
		"topic=x&passwrod=hunter2%zz":     `bad query string: the value of "passwrod" is badly escaped (write a literal '%' as %25)`,
		"topic=x&hunter2%zz=1":            `bad query string: a parameter's name is badly escaped (write a literal '%' as %25)`,
		"topic=x;hunter2":                 `bad query string: a ';' in the value of "topic" (separate parameters with '&'; write a literal ';' as %3B)`,
		"topic=x&pass;hunter2=1":          `bad query string: a ';' in a parameter's name (separate parameters with '&')`,
		"topic=x&tls_ca=%2Fhunter2&a%20b": `unknown query parameter "a b" (known: timeout, topic)`,
	} {
		_, err := ParseURLQuery(raw, known, false)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "%zz")) {
			t.Errorf("%s: the error quotes a value: %v", raw, err)
		}
	}
	// With a stray '@', no piece of the query is shown.
	for _, raw := range []string{"pw=1", "a=%zz", "topic=a&topic=b"} {
		_, err := ParseURLQuery(raw, known, true)
		if err == nil || !strings.Contains(err.Error(), notShown) || strings.Contains(err.Error(), `"`) {
			t.Errorf("%s, hidden: %v", raw, err)
		}
	}
	q, _ := ParseURLQuery("timeout=x", known, true)
	var d time.Duration
	if q.Duration("timeout", &d); q.Err() == nil || q.Err().Error() != "timeout="+notShown+": want a positive duration such as 10s" {
		t.Errorf("getter, hidden: %v", q.Err())
	}
}

func TestURLQueryGetters(t *testing.T) {
	known := []string{"b", "d", "n", "s", "tls_ca", "tls_insecure", "tls_server_name"}
	q, err := ParseURLQuery("b=1&d=30s&n=7&s=&tls_ca=/ca.pem&tls_insecure=true&tls_server_name=x.test", known, false)
	if err != nil {
		t.Fatal(err)
	}
	b, d, n := false, time.Second, 1
	q.Bool("b", &b)
	q.Duration("d", &d)
	q.Int("n", 1, 32, &n)
	o := q.TLS(true, "kafkas")
	if err := q.Err(); err != nil || !b || d != 30*time.Second || n != 7 {
		t.Fatalf("b %v d %v n %v err %v", b, d, n, err)
	}
	if o != (TLSOptions{CA: "/ca.pem", Insecure: true, ServerName: "x.test"}) {
		t.Errorf("tls %+v", o)
	}
	if !q.Has("s") || q.Get("s") != "" || q.Has("missing") {
		t.Errorf("Has/Get of an empty value")
	}
	// Absent keys leave the defaults.
	q, _ = ParseURLQuery("", known, false)
	q.Bool("b", &b)
	q.Duration("d", &d)
	q.Int("n", 1, 32, &n)
	if q.Err() != nil || !b || d != 30*time.Second || n != 7 {
		t.Errorf("absent keys changed a default")
	}
}

func TestURLQueryBadValues(t *testing.T) {
	known := []string{"b", "d", "n", "tls_ca", "tls_insecure", "tls_server_name", "tls_x"}
	for raw, want := range map[string]string{
		"b=maybe":             `b=xxxxx: want true or false`,
		"d=-1s":               `d=xxxxx: want a positive duration such as 10s`,
		"d=soon":              `d=xxxxx: want a positive duration such as 10s`,
		"n=0":                 `n=xxxxx: want a whole number from 1 to 32`,
		"n=x":                 `n=xxxxx: want a whole number from 1 to 32`,
		"tls_insecure=maybe":  `tls_insecure=xxxxx: want true or false`,
		"b=x&d=y":             `b=xxxxx: want true or false`, // the first one read
		"tls_server_name=x.t": "tls_server_name needs kafkas:// (TLS)",
		"tls_x=1":             "tls_x needs kafkas:// (TLS)",
	} {
		q, err := ParseURLQuery(raw, known, false)
		if err != nil {
			t.Fatal(err)
		}
		var b bool
		var d time.Duration
		var n int
		q.Bool("b", &b)
		q.Duration("d", &d)
		q.Int("n", 1, 32, &n)
		q.TLS(false, "kafkas", "tls_x")
		if q.Err() == nil || q.Err().Error() != want {
			t.Errorf("%s: %v, want %q", raw, q.Err(), want)
		}
	}
	q, _ := ParseURLQuery("tls_ca=/x", known, false)
	if q.TLS(true, "kafkas"); q.Err() != nil {
		t.Errorf("tls_ca on a TLS scheme: %v", q.Err())
	}
	q.Fail("tls_ca", "a file")
	q.Failf("later")
	if q.Err() == nil || q.Err().Error() != `tls_ca=xxxxx: want a file` {
		t.Errorf("Fail: %v", q.Err())
	}
}

// TestURLForError: the form of a URL that errors show keeps the scheme,
// hosts and path, and leaves out the user info's secrets, the query and
// a fragment, whatever they hold.
func TestURLForError(t *testing.T) {
	for raw, want := range map[string]string{
		"kafka://h1:9092,h2:9093?topic=t&passwrod=S3cret": "kafka://h1:9092,h2:9093",
		"redis://u:pw?x@h:6379/0?stream=S3cret":           "redis://xxxxx",
		"redis://u:S3cret@h:6379/0?stream=s":              "redis://xxxxx@h:6379/0",
		"redis://h:6379/0?stream=s&x=S3cret@h":            "redis://xxxxx",
		"amqp://h:5672/vhost?queue=q#S3cret":              "amqp://h:5672/vhost",
		"pulsar://h:6650?admin=http://u:S3cret@h:8080":    "pulsar://xxxxx",
		"nats://h:4222#S3cret?stream=s":                   "nats://h:4222",
		"sqs://q":                                         "sqs://q",
	} {
		if got := URLForError(raw); got != want {
			t.Errorf("URLForError(%q) = %q, want %q", raw, got, want)
		}
	}
}
