package pulsardlq

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// Source URLs:
//
//	pulsar://host[:port]?topic=DLQTOPIC[&subscription=SUB][&admin=HTTPURL][&timeout=DUR]
//	pulsar+ssl://…same…[&tls_ca=FILE][&tls_insecure=true][&tls_hostname_verification=true]
//
// The port defaults to 6650 (pulsar://) or 6651 (pulsar+ssl://). Query
// options:
//
//	topic         the DLQ topic (required): NAME (in public/default),
//	              TENANT/NS/NAME, or persistent://TENANT/NS/NAME. The
//	              Pulsar client's default DLQ name is <topic>-<subscription>-DLQ.
//	subscription  the durable subscription the DLQ is read and acknowledged
//	              through (default dlqctl). Its unacknowledged messages are
//	              the DLQ's content; it is created at the earliest position
//	              when missing.
//	admin         the broker's admin REST base URL. Default http://HOST:8080
//	              for pulsar:// and https://HOST:8443 for pulsar+ssl://
//	              (Pulsar's default web service ports on the broker's host).
//	tls_ca        pulsar+ssl only: PEM file of CA certificates to trust,
//	              for the broker and an https admin URL
//	tls_insecure  pulsar+ssl only: "true" skips certificate verification
//	tls_hostname_verification
//	              pulsar+ssl only: "true" also checks that the broker's
//	              certificate names its host (the Pulsar client's default is
//	              not to); it applies to the admin URL too
//
// The token (Options.Token, from DLQCTL_PULSAR_TOKEN or
// DLQCTL_PULSAR_TOKEN_FILE) never goes in the URL: a URL with user info is
// refused, and no URL dlqctl prints holds a secret.

const (
	defaultPort    = 6650
	defaultTLSPort = 6651
	// DefaultSubscription is the DLQ subscription when the URL names none.
	DefaultSubscription = "dlqctl"
)

// redacted replaces a secret wherever dlqctl shows a URL.
const redacted = backend.Redacted

var knownParams = []string{"admin", "subscription", "timeout", "tls_ca", "tls_hostname_verification", "tls_insecure", "topic"}

// sourceURL is a parsed Pulsar source URL.
type sourceURL struct {
	scheme       string
	host         string
	port         int
	topic        topicName
	subscription string
	admin        *url.URL
	adminGiven   bool
	tlsCA        string
	tlsInsecure  bool
	tlsHostname  bool
	// timeout bounds the client's operations and sends (?timeout=DUR):
	// how long a broker outage is ridden through before a command fails.
	timeout  time.Duration
	rawQuery string
}

func (u sourceURL) tls() bool { return u.scheme == "pulsar+ssl" }

// serviceURL is the broker URL the client connects to.
func (u sourceURL) serviceURL() string {
	return u.scheme + "://" + net.JoinHostPort(u.host, strconv.Itoa(u.port))
}

// Secrets is nothing: the token comes from the environment or the
// profile, never the URL.
func (u sourceURL) Secrets() []string { return nil }

// Display is the URL as given, minus anything secret (there is none in a
// valid URL: user info is refused and the admin URL's is hidden).
func (u sourceURL) Display() string {
	s := u.serviceURL()
	if u.rawQuery != "" {
		s += "?" + u.rawQuery
	}
	return s
}

// topicName is a persistent topic's parts.
type topicName struct {
	tenant, namespace, local string
}

func (t topicName) String() string {
	return "persistent://" + t.tenant + "/" + t.namespace + "/" + t.local
}

// partition is the name of partition i of a partitioned topic.
func (t topicName) partition(i int) topicName {
	t.local = t.local + "-partition-" + strconv.Itoa(i)
	return t
}

// adminPath is the topic's path under /admin/v2/.
func (t topicName) adminPath() string {
	return "/admin/v2/persistent/" + url.PathEscape(t.tenant) + "/" + url.PathEscape(t.namespace) + "/" + url.PathEscape(t.local)
}

// parseTopic reads NAME, TENANT/NS/NAME or persistent://TENANT/NS/NAME.
// Its errors leave s for the caller to show or not.
func parseTopic(s string) (topicName, error) {
	rest, full := strings.CutPrefix(s, "persistent://")
	if !full && strings.Contains(s, "://") {
		return topicName{}, errors.New("only persistent:// topics keep a durable subscription's backlog")
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && !full:
		parts = []string{"public", "default", parts[0]}
	case len(parts) == 3:
	default:
		return topicName{}, errors.New("want NAME, TENANT/NAMESPACE/NAME or persistent://TENANT/NAMESPACE/NAME")
	}
	for _, p := range parts {
		if p == "" {
			return topicName{}, errors.New("empty tenant, namespace or name")
		}
	}
	return topicName{tenant: parts[0], namespace: parts[1], local: parts[2]}, nil
}

// parseURL reads a source URL. Every error is a *backend.ConfigError and
// none of them quotes user info or an unknown query parameter's value.
func parseURL(raw string) (sourceURL, error) {
	var u sourceURL
	pu, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		reason := err
		if errors.As(err, &ue) {
			reason = ue.Err
		}
		return u, backend.Configf("pulsar source %s: not a valid URL: %v", backend.URLForError(raw), reason)
	}
	u.scheme = pu.Scheme
	if u.scheme != "pulsar" && u.scheme != "pulsar+ssl" {
		return u, backend.Configf("pulsar source %s: unknown scheme %q (want pulsar:// or pulsar+ssl://)", backend.URLForError(raw), pu.Scheme)
	}
	if pu.Opaque != "" || pu.Host == "" {
		return u, backend.Configf("pulsar source %s: want %s://HOST:PORT?topic=DLQTOPIC", backend.URLForError(raw), u.scheme)
	}
	if pu.User != nil {
		return u, backend.Configf("pulsar source %s: user info in the URL is not supported; pass the token in DLQCTL_PULSAR_TOKEN or DLQCTL_PULSAR_TOKEN_FILE", backend.URLForError(raw))
	}
	// A piece quoted in an error may hold a password's end when the URL
	// has an '@' its user info does not account for.
	quote := func(v string) string { return backend.QuoteURLPiece(raw, false, v) }
	if pu.Path != "" && pu.Path != "/" {
		return u, backend.Configf("pulsar source %s: unexpected path %s (the topic goes in ?topic=)", backend.URLForError(raw), quote(pu.Path))
	}
	u.host = pu.Hostname()
	u.port = defaultPort
	if u.tls() {
		u.port = defaultTLSPort
	}
	if p := pu.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return u, backend.Configf("pulsar source %s: bad port %s (want 1-65535)", backend.URLForError(raw), quote(p))
		}
		u.port = n
	}
	q, err := backend.ParseURLQuery(pu.RawQuery, knownParams, backend.StrayAt(raw, false))
	if err != nil {
		return u, backend.Configf("pulsar source %s: %v", backend.URLForError(raw), err)
	}
	// Checked before anything shows the query: its user info is hidden.
	if u.admin, err = adminURL(q.Get("admin")); err != nil {
		return u, backend.Configf("pulsar source %s: %v", backend.URLForError(raw), err)
	}
	u.adminGiven = u.admin != nil
	u.rawQuery = pu.RawQuery
	if err := u.readQuery(q); err != nil {
		return u, backend.Configf("pulsar source %s: %v", backend.URLForError(raw), err)
	}
	if u.admin == nil {
		scheme, port := "http", "8080"
		if u.tls() {
			scheme, port = "https", "8443"
		}
		u.admin = &url.URL{Scheme: scheme, Host: net.JoinHostPort(u.host, port)}
	}
	return u, nil
}

// adminURL reads admin=, the broker's admin REST base URL; nil when not
// given.
func adminURL(a string) (*url.URL, error) {
	if a == "" {
		return nil, nil
	}
	au, err := url.Parse(a)
	if err != nil || (au.Scheme != "http" && au.Scheme != "https") || au.Host == "" {
		return nil, fmt.Errorf("admin=%s: want http://HOST:PORT or https://HOST:PORT", backend.Redacted)
	}
	if au.User != nil {
		return nil, errors.New("admin URL with user info is not supported; pass the token in DLQCTL_PULSAR_TOKEN")
	}
	return au, nil
}

// readQuery reads the topic, the subscription and the options.
func (u *sourceURL) readQuery(q *backend.URLQuery) error {
	if q.Get("topic") == "" {
		return errors.New("no topic: add ?topic=DLQTOPIC (the client's default DLQ is <topic>-<subscription>-DLQ)")
	}
	var err error
	if u.topic, err = parseTopic(q.Get("topic")); err != nil {
		return fmt.Errorf("topic=%s: %v", backend.Redacted, err)
	}
	u.subscription = DefaultSubscription
	if q.Has("subscription") {
		if u.subscription = q.Get("subscription"); u.subscription == "" {
			return errors.New("subscription is empty")
		}
	}
	q.Bool("tls_hostname_verification", &u.tlsHostname)
	q.Duration("timeout", &u.timeout)
	tlsOpts := q.TLS(u.tls(), "pulsar+ssl", "tls_hostname_verification")
	u.tlsCA, u.tlsInsecure = tlsOpts.CA, tlsOpts.Insecure
	return q.Err()
}

// adminTLS is the TLS setting for an https admin URL: the same trust as
// the broker connection. Without tls_hostname_verification the chain is
// still verified, only the host name is not, as the Pulsar client does.
func (u sourceURL) adminTLS() (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.admin.Hostname()}
	var roots *x509.CertPool
	if u.tlsCA != "" {
		var err error
		if roots, err = backend.LoadCA(u.tlsCA); err != nil {
			return nil, backend.Configf("pulsar source %s: %v", u.Display(), err)
		}
		conf.RootCAs = roots
	}
	switch {
	case u.tlsInsecure:
		conf.InsecureSkipVerify = true // only when the URL asks for it
	case !u.tlsHostname:
		conf.InsecureSkipVerify = true // the chain is checked below
		conf.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("admin TLS: no server certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return conf, nil
}
