package redisstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
)

// Source URLs:
//
//	redis://[user[:password]@]host[:port][/db]?stream=KEY[&group=G]
//	rediss://…same…[&tls_ca=FILE][&tls_server_name=NAME][&tls_insecure=true]
//
// The port defaults to 6379, the host to localhost and db to 0. Query
// options:
//
//	stream           the DLQ stream's key (required)
//	group            the consumer group the DLQ is read through, if any; a
//	                 redrive then also XACKs the entry in that group
//	tls_ca           rediss only: PEM file of CA certificates to trust
//	                 instead of the system's
//	tls_server_name  rediss only: name to verify the server certificate
//	                 against, when it differs from host
//	tls_insecure     rediss only: "true" skips certificate verification
//	cluster          "true": host:port is a seed node of a Redis Cluster
//	                 (db must be 0); see cluster.go for how moves work there
//
// A password in the URL wins over Options.Password (DLQCTL_REDIS_PASSWORD).
// Special characters in a user name or password must be percent-encoded.

const defaultPort = 6379

// redacted replaces a password wherever dlqctl shows a source URL.
const redacted = backend.Redacted

var knownParams = []string{"cluster", "group", "stream", "tls_ca", "tls_insecure", "tls_server_name"}

// sourceURL is a parsed Redis source URL.
type sourceURL struct {
	scheme        string
	user          string
	password      string
	hasPassword   bool
	host          string
	port          int
	db            int
	stream        string
	group         string
	tlsCA         string
	tlsServerName string
	tlsInsecure   bool
	cluster       bool
	rawQuery      string
	// typed is the URL as it was given, password hidden: errors name it,
	// not the form with defaults filled in.
	typed string
}

func (u sourceURL) addr() string { return net.JoinHostPort(u.host, strconv.Itoa(u.port)) }

// display is the URL with its password replaced by xxxxx.
func (u sourceURL) display() string {
	var b strings.Builder
	b.WriteString(u.scheme + "://")
	switch {
	case u.hasPassword:
		b.WriteString(url.UserPassword(u.user, redacted).String() + "@")
	case u.user != "":
		b.WriteString(url.User(u.user).String() + "@")
	}
	fmt.Fprintf(&b, "%s/%d", u.addr(), u.db)
	if u.rawQuery != "" {
		b.WriteString("?" + u.rawQuery)
	}
	return b.String()
}

// parseURL reads a source URL. Every error is a *backend.ConfigError and
// none of them contains the password: url.Parse's own errors quote the
// whole URL, so they are never passed on as they are.
func parseURL(raw string) (sourceURL, error) {
	var u sourceURL
	pu, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return u, backend.Configf("redis source %s: not a valid URL (percent-encode special characters in the user name or password, or pass the password in DLQCTL_REDIS_PASSWORD)", backend.RedactUserinfo(raw))
		}
		var ue *url.Error
		reason := err
		if errors.As(err, &ue) {
			reason = ue.Err
		}
		return u, backend.Configf("redis source %q: not a valid URL: %v", raw, reason)
	}
	u.scheme, u.typed = pu.Scheme, typedURL(raw, pu)
	if u.scheme != "redis" && u.scheme != "rediss" {
		return u, backend.Configf("redis source %s: unknown scheme %q (want redis:// or rediss://)", backend.RedactUserinfo(raw), pu.Scheme)
	}
	if pu.Opaque != "" {
		return u, backend.Configf("redis source %s: want %s://host:port/db?stream=KEY", backend.RedactUserinfo(raw), u.scheme)
	}
	if pu.User != nil {
		u.user = pu.User.Username()
		u.password, u.hasPassword = pu.User.Password()
	}
	u.host = pu.Hostname()
	if u.host == "" {
		u.host = "localhost"
	}
	u.port = defaultPort
	if p := pu.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return u, backend.Configf("redis source %s: bad port %q (want 1-65535)", backend.RedactUserinfo(raw), p)
		}
		u.port = n
	}
	// Checked before anything shows the query, which could then hold
	// anything, a password=… included.
	q, err := url.ParseQuery(pu.RawQuery)
	if err != nil {
		return u, backend.Configf("redis source %s: bad query string: %v", backend.RedactUserinfo(withoutQuery(raw)), err)
	}
	for k, vs := range q {
		if !contains(knownParams, k) {
			return u, backend.Configf("redis source %s: unknown query parameter %q (known: %s)", backend.RedactUserinfo(withoutQuery(raw)), k, strings.Join(knownParams, ", "))
		}
		if len(vs) > 1 {
			return u, backend.Configf("redis source %s: query parameter %q given %d times", backend.RedactUserinfo(withoutQuery(raw)), k, len(vs))
		}
	}
	u.rawQuery = pu.RawQuery
	u.stream = q.Get("stream")
	u.group = q.Get("group")
	u.tlsCA = q.Get("tls_ca")
	u.tlsServerName = q.Get("tls_server_name")

	path := strings.TrimPrefix(pu.Path, "/")
	if path != "" {
		n, err := strconv.Atoi(path)
		if err != nil || n < 0 {
			return u, backend.Configf("redis source %s: bad database %q in the path (want a number: redis://host:port/DB)", u.typed, path)
		}
		u.db = n
	}
	if _, ok := q["stream"]; !ok || u.stream == "" {
		return u, backend.Configf("redis source %s: no stream: add ?stream=KEY, the DLQ stream's key", u.typed)
	}
	if _, ok := q["group"]; ok && u.group == "" {
		return u, backend.Configf("redis source %s: group is empty", u.typed)
	}
	if v, ok := q["tls_insecure"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return u, backend.Configf("redis source %s: tls_insecure=%q: want true or false", u.display(), v[0])
		}
		u.tlsInsecure = b
	}
	if v, ok := q["cluster"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return u, backend.Configf("redis source %s: cluster=%q: want true or false", u.display(), v[0])
		}
		u.cluster = b
		if b && u.db != 0 {
			return u, backend.Configf("redis source %s: database %d: Redis Cluster has only database 0", u.display(), u.db)
		}
	}
	if u.scheme == "redis" {
		for _, k := range []string{"tls_ca", "tls_server_name", "tls_insecure"} {
			if _, ok := q[k]; ok {
				return u, backend.Configf("redis source %s: %s needs rediss:// (TLS)", u.display(), k)
			}
		}
	}
	return u, nil
}

// tlsConfig builds the TLS settings of a rediss:// URL.
func (u sourceURL) tlsConfig() (*tls.Config, error) {
	conf, err := backend.TLSOptions{CA: u.tlsCA, Insecure: u.tlsInsecure, ServerName: u.tlsServerName}.Config(u.host)
	if err != nil {
		return nil, backend.Configf("redis source %s: %v", u.display(), err)
	}
	return conf, nil
}

func withoutQuery(raw string) string {
	// The password may itself hold a "?", so cut at the last one after the
	// last "@".
	at := strings.LastIndex(raw, "@")
	if q := strings.Index(raw[at+1:], "?"); q >= 0 {
		return raw[:at+1+q]
	}
	return raw
}

func contains(list []string, s string) bool {
	i := sort.SearchStrings(list, s)
	return i < len(list) && list[i] == s
}

// typedURL is raw as it was given with the password of its user info
// hidden, the user name kept.
func typedURL(raw string, pu *url.URL) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return backend.RedactUserinfo(raw)
	}
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	out := raw
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
			out = raw[:i+3] + user + ":" + redacted + rest[at:]
		}
	}
	if pw, ok := pu.User.Password(); ok && pw != "" && strings.Contains(out, pw) {
		return backend.RedactUserinfo(raw) // typed in a way not cut above
	}
	// A password the parser did not see as one (after a stray "#", say)
	// is still a password.
	for _, secret := range backend.URLSecrets(raw) {
		if strings.Contains(out, secret) {
			return backend.RedactURL(raw)
		}
	}
	return out
}
