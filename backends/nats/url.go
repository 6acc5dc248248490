package natsdlq

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// Source URLs:
//
//	nats://[user:pass@|token@]host:port[,host:port…]?stream=DLQSTREAM[&options]
//	tls://…same…
//
// stream       the stream that holds the dead letters: a stream of copies
//              (shape a), or with advisories=1 the advisory stream that
//              `dlqctl dlq init` made (shape b)
// advisories   1: the stream holds the server's MAX_DELIVERIES and
//              MSG_TERMINATED advisories (shape b)
// consumer     dlq init: the consumer whose advisories to capture (with stream
//              naming the stream it reads)
// creds        a .creds file (JWT and NKey seed) to authenticate with
// lease_bucket the KV bucket holding DLQ leases (default dlqctl_leases)
// timeout      how long one request waits (default 10s)
// tls_ca, tls_server_name, tls_insecure   TLS trust (tls:// or a server that
//              requires TLS)
//
// A user without a password takes the password from DLQCTL_NATS_PASSWORD
// when it is set; a user name alone, without it, is a token.

var knownParams = []string{"advisories", "consumer", "creds", "lease_bucket", "stream", "timeout", "tls_ca", "tls_insecure", "tls_server_name"}

const (
	defaultPort        = "4222"
	defaultTimeout     = 10 * time.Second
	defaultLeaseBucket = "dlqctl_leases"
	// PasswordEnv is the environment variable with the NATS password.
	PasswordEnv = "DLQCTL_NATS_PASSWORD"
)

// streamName is what the server accepts as a stream or consumer name:
// no whitespace, dots, wildcards or path separators.
var streamName = regexp.MustCompile(`^[^\s.*>/\\]{1,255}$`)

// bucketName is what the server accepts as a KV bucket name.
var bucketName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// sourceURL is a parsed NATS source URL.
type sourceURL struct {
	raw        string
	scheme     string
	hasInfo    bool
	hasPass    bool   // the user info has a ":"
	hostPart   string // hosts (and any path) as written
	query      string
	hosts      []string // host:port, in the order given
	stream     string
	consumer   string
	advisories bool
	user       string
	password   string
	token      string
	creds      string
	bucket     string
	timeout    time.Duration
	tls        backend.TLSOptions
}

// parseURL reads a nats:// or tls:// source URL; getenv may be nil. Every
// error is a *backend.ConfigError and none quotes a secret.
func parseURL(raw string, getenv func(string) string) (sourceURL, error) {
	u := sourceURL{raw: raw, timeout: defaultTimeout, bucket: defaultLeaseBucket}
	// Several hosts (a cluster's seed list) make the URL no valid URL for
	// net/url: the helper cuts it by hand.
	p, ok, err := backend.SplitSourceURL(raw, []string{"nats", "tls"}, false)
	if !ok {
		return u, backend.Configf("nats source %s: want nats://host:port?stream=DLQ or tls://…", backend.URLForError(raw))
	}
	u.scheme, u.hasInfo, u.hostPart, u.query = p.Scheme, p.HasUser, p.Hosts, p.RawQuery
	if err != nil {
		return u, backend.Configf("nats source %s: %v", backend.URLForError(raw), err)
	}
	if err := u.credentials(p, getenv); err != nil {
		return u, backend.Configf("nats source %s: %v", backend.URLForError(raw), err)
	}
	if u.hosts, err = parseHosts(strings.TrimSuffix(p.Hosts, "/")); err != nil {
		return u, backend.Configf("nats source %s: %v", backend.URLForError(raw), err)
	}
	q, err := backend.ParseURLQuery(p.RawQuery, knownParams, backend.StrayAt(raw, p.HasUser))
	if err != nil {
		return u, backend.Configf("nats source %s: %v", backend.URLForError(raw), err)
	}
	if err := u.readQuery(q); err != nil {
		return u, backend.Configf("nats source %s: %v", backend.URLForError(raw), err)
	}
	return u, nil
}

// credentials takes the user info: user and password, or a user name
// alone, which is a token unless DLQCTL_NATS_PASSWORD gives a password.
func (u *sourceURL) credentials(p backend.SourceURL, getenv func(string) string) error {
	if !p.HasUser {
		return nil
	}
	u.user, u.password, u.hasPass = p.User, p.Password, p.HasPassword
	if !p.HasPassword {
		env := ""
		if getenv != nil {
			env = getenv(PasswordEnv)
		}
		if env != "" {
			u.password = env
		} else {
			u.token, u.user = u.user, ""
		}
	}
	if u.user == "" && u.password != "" {
		return errors.New("a password needs a user name")
	}
	return nil
}

// withEnv is u, parsed without an environment, as parseURL with getenv
// would have read it: a user named without a password takes
// DLQCTL_NATS_PASSWORD when it is set, where without it the name was a
// token.
func (u sourceURL) withEnv(getenv func(string) string) (sourceURL, error) {
	if !u.hasInfo || u.hasPass || getenv == nil || getenv(PasswordEnv) == "" {
		return u, nil
	}
	u.user, u.password, u.token = u.token, getenv(PasswordEnv), ""
	if u.user == "" {
		return u, backend.Configf("nats source %s: %v", backend.URLForError(u.raw), errors.New("a password needs a user name"))
	}
	return u, nil
}

// parseHosts reads the seed list, host[:port][,host[:port]…].
func parseHosts(list string) ([]string, error) {
	if strings.Contains(list, "/") {
		return nil, errors.New("unexpected path (want nats://host:port?stream=DLQ)")
	}
	var hosts []string
	for _, h := range strings.Split(list, ",") {
		if h == "" {
			return nil, errors.New("no host")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, defaultPort
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, errors.New("a host's port is not a port number")
		}
		if host == "" {
			return nil, errors.New("no host")
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return hosts, nil
}

// readQuery reads the stream and the options.
func (u *sourceURL) readQuery(q *backend.URLQuery) error {
	u.stream = q.Get("stream")
	if u.stream == "" {
		return errors.New("no stream (add ?stream=DLQSTREAM)")
	}
	if !streamName.MatchString(u.stream) {
		return fmt.Errorf("stream=%s: want a JetStream stream name (no spaces, dots, *, > or slashes)", backend.Redacted)
	}
	if c := q.Get("consumer"); c != "" {
		if !streamName.MatchString(c) {
			return fmt.Errorf("consumer=%s: want a JetStream consumer name (no spaces, dots, *, > or slashes)", backend.Redacted)
		}
		u.consumer = c
	}
	if q.Has("advisories") {
		b, err := strconv.ParseBool(q.Get("advisories"))
		if err != nil {
			q.Fail("advisories", "1 or 0")
		}
		u.advisories = b
	}
	if q.Has("lease_bucket") {
		if u.bucket = q.Get("lease_bucket"); !bucketName.MatchString(u.bucket) {
			q.Fail("lease_bucket", "letters, digits, - and _")
		}
	}
	q.Duration("timeout", &u.timeout)
	u.creds = q.Get("creds")
	if u.creds != "" && (u.user != "" || u.token != "") {
		q.Failf("creds= and user info in the URL are two ways to authenticate; give one")
	}
	// tls:// is not the only way to TLS: a server that requires it
	// upgrades a nats:// connection, so the keys are taken with either.
	u.tls = q.TLS(true, "tls")
	return q.Err()
}

// Display is the URL with its password or token replaced.
func (u sourceURL) Display() string {
	if u.scheme == "" {
		return backend.RedactURL(u.raw)
	}
	if backend.StrayAt(u.raw, u.hasInfo) {
		// An '@' the split did not take: a password with an unescaped
		// '?' may be anywhere before the last one.
		return backend.RedactUserinfo(u.raw)
	}
	out := u.scheme + "://"
	switch {
	case u.token != "":
		out += backend.Redacted + "@"
	case u.hasInfo:
		out += backend.UserinfoDisplay(u.user, u.hasPass)
	}
	out += u.hostPart
	if u.query != "" {
		out += "?" + u.query
	}
	return out
}

// Secrets are the strings that must never be printed.
func (u sourceURL) Secrets() []string {
	var out []string
	for _, s := range []string{u.password, u.token} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// serverURLs is the seed list for nats.Connect, without user info (the
// credentials go in as options, so the client never echoes them).
func (u sourceURL) serverURLs() string {
	parts := make([]string, len(u.hosts))
	for i, h := range u.hosts {
		parts[i] = u.scheme + "://" + h
	}
	return strings.Join(parts, ",")
}

// tlsConfig is the TLS setting when tls:// or a TLS option asks for one,
// else nil (the client still upgrades when the server requires TLS).
func (u sourceURL) tlsConfig() (*tls.Config, error) {
	if u.scheme != "tls" && u.tls == (backend.TLSOptions{}) {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(u.hosts[0])
	conf, err := u.tls.Config(host)
	if err != nil {
		return nil, backend.Configf("nats source %s: %v", u.Display(), err)
	}
	return conf, nil
}

// errNoCreds: the creds file named in the URL cannot be read.
var errNoCreds = errors.New("creds file not readable")

func (u sourceURL) checkCreds() error {
	if u.creds == "" {
		return nil
	}
	if _, err := os.Stat(u.creds); err != nil {
		return backend.Configf("nats source %s: creds=%s: %v", u.Display(), u.creds, errors.Join(errNoCreds, errors.Unwrap(err)))
	}
	return nil
}
