package rabbitmq

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
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
// dlq init takes dlq=, dlx= and dlx_routing_key= too (queue= then names
// the origin); Open refuses them.
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

	// init holds dlq init's keys.
	init initOpts
}

const (
	defaultHeartbeat = 10 * time.Second
	defaultTimeout   = 30 * time.Second
)

var knownParams = []string{"admin", "dlq", "dlx", "dlx_routing_key", "heartbeat", "queue", "timeout", "tls_ca", "tls_insecure", "tls_server_name"}

// parseURL never puts the password into an error.
func parseURL(raw string) (sourceURL, error) {
	s := sourceURL{heartbeat: defaultHeartbeat, timeout: defaultTimeout}
	bad := func(format string, args ...any) error {
		return backend.Configf("amqp source %s: "+format, append([]any{backend.URLForError(raw)}, args...)...)
	}
	p, ok, err := backend.SplitSourceURL(raw, []string{"amqp", "amqps"}, true)
	if !ok {
		return s, backend.Configf("amqp source %q: want amqp://host:port/VHOST?queue=DLQ or amqps://", backend.URLForError(raw))
	}
	if strings.Contains(p.RawQuery, "#") {
		return s, bad("a fragment (#) is not allowed")
	}
	if err != nil {
		return s, bad("%v", err)
	}
	if p.HasUser && p.User == "" {
		return s, bad("the user name is empty")
	}
	s.scheme, s.user, s.password = p.Scheme, p.User, p.Password
	// A piece quoted in an error may hold a password's end when the URL
	// has an '@' its user info does not account for.
	quote := func(v string) string { return backend.QuoteURLPiece(raw, p.HasUser, v) }
	if s.host, err = brokerAddr(p.Hosts, s.scheme, quote); err != nil {
		return s, bad("%v", err)
	}
	s.vhost = "/"
	if path := strings.TrimPrefix(p.Path, "/"); path != "" {
		if s.vhost, err = url.PathUnescape(path); err != nil {
			return s, bad("the vhost %s is badly escaped", quote(path))
		}
	}
	q, err := backend.ParseURLQuery(p.RawQuery, knownParams, backend.StrayAt(raw, p.HasUser))
	if err != nil {
		return s, bad("%v", err)
	}
	s.queue = q.Get("queue")
	if s.queue == "" {
		return s, bad("queue= is required (the DLQ queue, e.g. orders.dlq)")
	}
	if len(s.queue) > 255 || strings.HasPrefix(s.queue, "amq.") {
		q.Failf("queue=%q: not a queue name dlqctl can read (at most 255 bytes, not amq.*)", s.queue)
	}
	if a := q.Get("admin"); a != "" {
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			q.Fail("admin", "the management API's base URL, http://host:15672")
		}
		s.admin = strings.TrimSuffix(a, "/")
	}
	s.init = initOpts{dlq: q.Get("dlq"), dlx: q.Get("dlx"), dlxKey: q.Get("dlx_routing_key"), dlxSet: q.Has("dlx")}
	q.Duration("heartbeat", &s.heartbeat)
	q.Duration("timeout", &s.timeout)
	tlsOpts := q.TLS(s.scheme == "amqps", "amqps")
	s.tlsCA, s.tlsInsecure, s.tlsServerName = tlsOpts.CA, tlsOpts.Insecure, tlsOpts.ServerName
	if err := q.Err(); err != nil {
		return s, bad("%v", err)
	}
	return s, nil
}

// brokerAddr is the broker's host:port, the port defaulting to AMQP's.
func brokerAddr(authority, scheme string, quote func(string) string) (string, error) {
	if authority == "" {
		return "", fmt.Errorf("no broker address (want host[:port])")
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
		return "", fmt.Errorf("broker %s is not host[:port]", quote(authority))
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", fmt.Errorf("broker %s: bad port", quote(authority))
	}
	return net.JoinHostPort(host, port), nil
}

// contains says whether list holds s.
func contains(list []string, s string) bool { return slices.Contains(list, s) }

// initOnly names the dlq init keys the URL has, "" when none.
func (s sourceURL) initOnly() string {
	var ks []string
	if s.init.dlq != "" {
		ks = append(ks, "dlq=")
	}
	if s.init.dlxSet {
		ks = append(ks, "dlx=")
	}
	if s.init.dlxKey != "" {
		ks = append(ks, "dlx_routing_key=")
	}
	return strings.Join(ks, ", ")
}

// Display is the URL with the password replaced by backend.Redacted (in
// the admin URL too).
func (s sourceURL) Display() string {
	var b strings.Builder
	b.WriteString(s.scheme + "://")
	if s.user != "" {
		b.WriteString(backend.UserinfoDisplay(s.user, s.password != ""))
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

// Secrets are the URL's password and the admin URL's own.
func (s sourceURL) Secrets() []string {
	secrets := s.adminSecrets()
	if s.password != "" {
		secrets = append(secrets, s.password)
	}
	return secrets
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
		return nil, backend.Configf("amqp source %s: %v", s.Display(), err)
	}
	return c, nil
}
