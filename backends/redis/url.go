package redisstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
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

// Secrets is the URL's password, when it has one.
func (u sourceURL) Secrets() []string { return []string{u.password} }

// Display is the URL with its password replaced by xxxxx.
func (u sourceURL) Display() string {
	var b strings.Builder
	b.WriteString(u.scheme + "://")
	b.WriteString(backend.UserinfoDisplay(u.user, u.hasPassword))
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
			return u, backend.Configf("redis source %s: not a valid URL (percent-encode special characters in the user name or password, or pass the password in DLQCTL_REDIS_PASSWORD)", backend.URLForError(raw))
		}
		var ue *url.Error
		reason := err
		if errors.As(err, &ue) {
			reason = ue.Err
		}
		return u, backend.Configf("redis source %s: not a valid URL: %v", backend.URLForError(raw), reason)
	}
	u.scheme, u.typed = pu.Scheme, typedURL(raw, pu)
	if u.scheme != "redis" && u.scheme != "rediss" {
		return u, backend.Configf("redis source %s: unknown scheme %q (want redis:// or rediss://)", backend.URLForError(raw), pu.Scheme)
	}
	if pu.Opaque != "" {
		return u, backend.Configf("redis source %s: want %s://host:port/db?stream=KEY", backend.URLForError(raw), u.scheme)
	}
	if pu.User != nil {
		u.user = pu.User.Username()
		u.password, u.hasPassword = pu.User.Password()
	}
	// A piece quoted in an error may hold a password's end when the URL
	// has an '@' its user info does not account for.
	quote := func(v string) string { return backend.QuoteURLPiece(raw, pu.User != nil, v) }
	u.host = pu.Hostname()
	if u.host == "" {
		u.host = "localhost"
	}
	u.port = defaultPort
	if p := pu.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return u, backend.Configf("redis source %s: bad port %s (want 1-65535)", backend.URLForError(raw), quote(p))
		}
		u.port = n
	}
	q, err := backend.ParseURLQuery(pu.RawQuery, knownParams, backend.StrayAt(raw, pu.User != nil))
	if err != nil {
		return u, backend.Configf("redis source %s: %v", backend.URLForError(raw), err)
	}
	u.rawQuery = pu.RawQuery
	if err := u.readQuery(q, pu.Path, quote); err != nil {
		return u, backend.Configf("redis source %s: %v", backend.URLForError(raw), err)
	}
	return u, nil
}

// readQuery reads the database from the path and the query's options.
func (u *sourceURL) readQuery(q *backend.URLQuery, path string, quote func(string) string) error {
	path = strings.TrimPrefix(path, "/")
	if path != "" {
		n, err := strconv.Atoi(path)
		if err != nil || n < 0 {
			return fmt.Errorf("bad database %s in the path (want a number: redis://host:port/DB)", quote(path))
		}
		u.db = n
	}
	u.stream, u.group = q.Get("stream"), q.Get("group")
	if u.stream == "" {
		return fmt.Errorf("no stream: add ?stream=KEY, the DLQ stream's key")
	}
	if q.Has("group") && u.group == "" {
		return fmt.Errorf("group is empty")
	}
	tlsOpts := q.TLS(u.scheme == "rediss", "rediss")
	u.tlsCA, u.tlsInsecure, u.tlsServerName = tlsOpts.CA, tlsOpts.Insecure, tlsOpts.ServerName
	q.Bool("cluster", &u.cluster)
	if u.cluster && u.db != 0 {
		q.Failf("database %d: Redis Cluster has only database 0", u.db)
	}
	return q.Err()
}

// tlsConfig builds the TLS settings of a rediss:// URL.
func (u sourceURL) tlsConfig() (*tls.Config, error) {
	conf, err := backend.TLSOptions{CA: u.tlsCA, Insecure: u.tlsInsecure, ServerName: u.tlsServerName}.Config(u.host)
	if err != nil {
		return nil, backend.Configf("redis source %s: %v", u.Display(), err)
	}
	return conf, nil
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
