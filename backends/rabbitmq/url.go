package rabbitmq

import (
	"crypto/tls"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// sourceURL is a parsed amqp:// or amqps:// source:
//
//	amqp://[user[:pass]@]host[:port]/[VHOST]?queue=DLQ[&admin=HTTPURL]
//	       [&heartbeat=10s][&timeout=30s]
//	amqps://…[&tls_ca=FILE][&tls_insecure=true][&tls_server_name=NAME]
//
// The vhost is the path, percent-decoded ("/" or none: the default vhost
// "/"; %2F writes a slash inside a name).
type sourceURL struct {
	scheme   string
	host     string // host:port
	user     string
	password string // from the URL; "" when not given there
	vhost    string
	queue    string
	admin    string // management API base URL, "" when not given
	// heartbeat is the AMQP heartbeat: it bounds how long a lease outlives
	// a holder behind a half-open connection.
	heartbeat time.Duration
	timeout   time.Duration

	tlsCA         string
	tlsInsecure   bool
	tlsServerName string
}

const (
	defaultHeartbeat = 10 * time.Second
	defaultTimeout   = 30 * time.Second
)

var knownParams = []string{"queue", "admin", "heartbeat", "timeout", "tls_ca", "tls_insecure", "tls_server_name"}

// parseURL never puts the password into an error.
func parseURL(raw string) (sourceURL, error) {
	s := sourceURL{heartbeat: defaultHeartbeat, timeout: defaultTimeout}
	bad := func(format string, args ...any) error {
		return backend.Configf("amqp source %s: "+format, append([]any{backend.RedactURL(raw)}, args...)...)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "amqp" && scheme != "amqps") {
		return s, backend.Configf("amqp source %q: want amqp://host:port/VHOST?queue=DLQ or amqps://", backend.RedactURL(raw))
	}
	s.scheme = scheme
	rest, query, _ := strings.Cut(rest, "?")
	if strings.Contains(query, "#") {
		return s, bad("a fragment (#) is not allowed")
	}
	authority, path, hasPath := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo := authority[:at]
		authority = authority[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err error
		if s.user, err = url.PathUnescape(user); err != nil || s.user == "" {
			return s, bad("the user name is empty or badly escaped")
		}
		if hasPass {
			if s.password, err = url.PathUnescape(pass); err != nil {
				return s, bad("the password is badly escaped (use %%XX for special characters)")
			}
		}
	}
	if authority == "" {
		return s, bad("no broker address (want host[:port])")
	}
	host, port, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
		port = "5672"
		if scheme == "amqps" {
			port = "5671"
		}
	}
	if host == "" || strings.ContainsAny(host, " /") {
		return s, bad("broker %q is not host[:port]", authority)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return s, bad("broker %q: bad port", authority)
	}
	s.host = net.JoinHostPort(host, port)
	s.vhost = "/"
	if hasPath && path != "" {
		if s.vhost, err = url.PathUnescape(path); err != nil {
			return s, bad("the vhost %q is badly escaped", path)
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return s, bad("bad query: %v", err)
	}
	for k := range q {
		if !contains(knownParams, k) {
			return s, bad("unknown parameter %q (known: %s)", k, strings.Join(knownParams, ", "))
		}
		if len(q[k]) > 1 {
			return s, bad("parameter %q given twice", k)
		}
	}
	s.queue = q.Get("queue")
	if s.queue == "" {
		return s, bad("queue= is required (the DLQ queue, e.g. orders.dlq)")
	}
	if len(s.queue) > 255 || strings.HasPrefix(s.queue, "amq.") {
		return s, bad("queue=%q: not a queue name dlqctl can read (at most 255 bytes, not amq.*)", s.queue)
	}
	if a := q.Get("admin"); a != "" {
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, bad("admin=%q: want the management API's base URL, http://host:15672", backend.RedactURL(a))
		}
		s.admin = strings.TrimSuffix(a, "/")
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"heartbeat", &s.heartbeat}, {"timeout", &s.timeout}} {
		if v := q.Get(d.name); v != "" {
			if *d.to, err = time.ParseDuration(v); err != nil || *d.to <= 0 {
				return s, bad("%s=%q: want a positive duration such as 10s", d.name, v)
			}
		}
	}
	s.tlsCA, s.tlsServerName = q.Get("tls_ca"), q.Get("tls_server_name")
	if v := q.Get("tls_insecure"); v != "" {
		if s.tlsInsecure, err = strconv.ParseBool(v); err != nil {
			return s, bad("tls_insecure=%q: want true or false", v)
		}
	}
	if scheme == "amqp" && (s.tlsCA != "" || s.tlsInsecure || s.tlsServerName != "") {
		return s, bad("tls_* parameters need amqps://")
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// display is the URL with the password replaced by backend.Redacted (in
// the admin URL too).
func (s sourceURL) display() string {
	var b strings.Builder
	b.WriteString(s.scheme + "://")
	if s.user != "" {
		b.WriteString(url.PathEscape(s.user))
		if s.password != "" {
			b.WriteString(":" + backend.Redacted)
		}
		b.WriteString("@")
	}
	b.WriteString(s.host + "/")
	if s.vhost != "/" {
		b.WriteString(url.PathEscape(s.vhost))
	}
	q := url.Values{"queue": {s.queue}}
	if s.admin != "" {
		q.Set("admin", backend.RedactURL(s.admin))
	}
	if s.heartbeat != defaultHeartbeat {
		q.Set("heartbeat", s.heartbeat.String())
	}
	if s.timeout != defaultTimeout {
		q.Set("timeout", s.timeout.String())
	}
	if s.tlsCA != "" {
		q.Set("tls_ca", s.tlsCA)
	}
	if s.tlsInsecure {
		q.Set("tls_insecure", "true")
	}
	if s.tlsServerName != "" {
		q.Set("tls_server_name", s.tlsServerName)
	}
	b.WriteString("?" + q.Encode())
	return b.String()
}

// adminSecrets are the secrets in the admin URL (its own user info).
func (s sourceURL) adminSecrets() []string {
	if s.admin == "" {
		return nil
	}
	return backend.URLSecrets(s.admin)
}

func (s sourceURL) tlsConfig() (*tls.Config, error) {
	if s.scheme != "amqps" {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(s.host)
	c, err := backend.TLSOptions{CA: s.tlsCA, Insecure: s.tlsInsecure, ServerName: s.tlsServerName}.Config(host)
	if err != nil {
		return nil, backend.Configf("amqp source %s: %v", s.display(), err)
	}
	return c, nil
}
