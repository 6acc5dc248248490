package natsdlq

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
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
	info       string // user info as written
	hasInfo    bool
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
	tlsCA      string
	tlsName    string
	tlsInsec   bool
}

// parseURL reads a nats:// or tls:// source URL; getenv may be nil. Every
// error is a *backend.ConfigError and none quotes a secret.
func parseURL(raw string, getenv func(string) string) (sourceURL, error) {
	u := sourceURL{raw: raw, timeout: defaultTimeout, bucket: defaultLeaseBucket}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "nats" && scheme != "tls") {
		return u, backend.Configf("nats source %s: want nats://host:port?stream=DLQ or tls://…", backend.RedactURL(raw))
	}
	u.scheme = scheme
	// Several hosts (a cluster's seed list) make the URL no valid URL for
	// net/url: the user info and the query are cut off by hand.
	info, hasInfo, hostPart, query := splitAuthority(rest)
	u.info, u.hasInfo, u.hostPart, u.query = info, hasInfo, hostPart, query
	hostPart = strings.TrimSuffix(hostPart, "/")
	if hasInfo {
		name, pass, hasPass := strings.Cut(info, ":")
		var err error
		if u.user, err = url.PathUnescape(name); err != nil {
			return u, backend.Configf("nats source %s: user info is not valid URL escaping", u.display())
		}
		if hasPass {
			if u.password, err = url.PathUnescape(pass); err != nil {
				return u, backend.Configf("nats source %s: user info is not valid URL escaping", u.display())
			}
		}
		if !hasPass {
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
			return u, backend.Configf("nats source %s: a password needs a user name", u.display())
		}
	}
	if strings.Contains(hostPart, "/") {
		return u, backend.Configf("nats source %s: unexpected path (want nats://host:port?stream=DLQ)", u.display())
	}
	for _, h := range strings.Split(hostPart, ",") {
		if h == "" {
			return u, backend.Configf("nats source %s: no host", u.display())
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, defaultPort
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return u, backend.Configf("nats source %s: a host's port is not a port number", u.display())
		}
		if host == "" {
			return u, backend.Configf("nats source %s: no host", u.display())
		}
		u.hosts = append(u.hosts, net.JoinHostPort(host, port))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return u, backend.Configf("nats source %s: bad query string: %v", u.display(), u.quote(err.Error()))
	}
	for k, vs := range q {
		if !slices.Contains(knownParams, k) {
			return u, backend.Configf("nats source %s: unknown query parameter %s (known: %s)", u.display(), u.quote(k), strings.Join(knownParams, ", "))
		}
		if len(vs) > 1 {
			return u, backend.Configf("nats source %s: query parameter %s given %d times", u.display(), u.quote(k), len(vs))
		}
	}
	u.stream = q.Get("stream")
	if u.stream == "" {
		return u, backend.Configf("nats source %s: no stream (add ?stream=DLQSTREAM)", u.display())
	}
	if !streamName.MatchString(u.stream) {
		return u, backend.Configf("nats source %s: stream %s is no JetStream stream name (no spaces, dots, *, > or slashes)", u.display(), u.quote(u.stream))
	}
	if c := q.Get("consumer"); c != "" {
		if !streamName.MatchString(c) {
			return u, backend.Configf("nats source %s: consumer %s is no JetStream consumer name", u.display(), u.quote(c))
		}
		u.consumer = c
	}
	if v, ok := q["advisories"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return u, backend.Configf("nats source %s: advisories=%s: want 1 or 0", u.display(), u.quote(v[0]))
		}
		u.advisories = b
	}
	if v, ok := q["lease_bucket"]; ok {
		if !bucketName.MatchString(v[0]) {
			return u, backend.Configf("nats source %s: lease_bucket=%s: want letters, digits, - and _", u.display(), u.quote(v[0]))
		}
		u.bucket = v[0]
	}
	if v, ok := q["timeout"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return u, backend.Configf("nats source %s: timeout=%s: want a positive duration such as 10s", u.display(), u.quote(v[0]))
		}
		u.timeout = d
	}
	u.creds = q.Get("creds")
	if u.creds != "" && (u.user != "" || u.token != "") {
		return u, backend.Configf("nats source %s: creds= and user info in the URL are two ways to authenticate; give one", u.display())
	}
	u.tlsCA, u.tlsName = q.Get("tls_ca"), q.Get("tls_server_name")
	if v, ok := q["tls_insecure"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return u, backend.Configf("nats source %s: tls_insecure=%s: want true or false", u.display(), u.quote(v[0]))
		}
		u.tlsInsec = b
	}
	return u, nil
}

// display is the URL with its password or token replaced.
func (u sourceURL) display() string {
	if u.scheme == "" {
		return backend.RedactURL(u.raw)
	}
	accounted := 0
	if u.hasInfo {
		accounted = 1
	}
	if strings.Count(u.raw, "@") > accounted {
		// An '@' the split did not take: a password with an unescaped
		// '?' may be anywhere before the last one.
		return backend.RedactUserinfo(u.raw)
	}
	out := u.scheme + "://"
	if u.hasInfo {
		if name, _, hasPass := strings.Cut(u.info, ":"); hasPass {
			out += name + ":" + backend.Redacted + "@"
		} else if u.user == "" {
			out += backend.Redacted + "@" // a token
		} else {
			out += name + "@"
		}
	}
	out += u.hostPart
	if u.query != "" {
		out += "?" + u.query
	}
	return out
}

// splitAuthority cuts what follows "scheme://" into user info, hosts and
// query: the user info ends at the last '@' before the query, as in any
// URL. (A password must escape '?', '/' and '@'; display hides more when
// it did not.)
func splitAuthority(rest string) (info string, hasInfo bool, hosts, query string) {
	hosts, query, _ = strings.Cut(rest, "?")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		return hosts[:at], true, hosts[at+1:], query
	}
	return "", false, hosts, query
}

// quote quotes a piece of the URL for an error, unless the URL holds an
// '@' its user info does not account for: then a password with an
// unescaped '?' may have run into the query, and no piece is shown.
func (u sourceURL) quote(v string) string {
	accounted := 0
	if u.hasInfo {
		accounted = 1
	}
	if strings.Count(u.raw, "@") > accounted {
		return "(not shown: the URL has an '@' after its user info; escape '@', '?' and '/' in a password)"
	}
	return strconv.Quote(v)
}

// secrets are the strings that must never be printed.
func (u sourceURL) secrets() []string {
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
	if u.scheme != "tls" && u.tlsCA == "" && u.tlsName == "" && !u.tlsInsec {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(u.hosts[0])
	conf, err := backend.TLSOptions{CA: u.tlsCA, Insecure: u.tlsInsec, ServerName: u.tlsName}.Config(host)
	if err != nil {
		return nil, backend.Configf("nats source %s: %v", u.display(), err)
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
		return backend.Configf("nats source %s: creds=%s: %v", u.display(), u.creds, errors.Join(errNoCreds, errors.Unwrap(err)))
	}
	return nil
}
