package kafkadlq

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// sourceURL is a parsed kafka:// or kafkas:// source:
//
//	kafka://[user[:pass]@]host:port[,host:port…]?topic=DLQ[&state_topic=T]
//	       [&sasl=plain|scram-sha-256|scram-sha-512][&timeout=30s]
//	kafkas://…[&tls_ca=FILE][&tls_insecure=true][&tls_server_name=NAME]
type sourceURL struct {
	scheme     string
	brokers    []string
	user       string
	password   string // from the URL; "" when not given there
	topic      string
	stateTopic string
	mechanism  string
	timeout    time.Duration

	// shareGroup is group=, which only dlq init takes (share_init.go).
	shareGroup string

	tlsCA         string
	tlsInsecure   bool
	tlsServerName string
}

var knownParams = []string{"copy", "group", "sasl", "state_topic", "timeout", "tls_ca", "tls_insecure", "tls_server_name", "topic"}

// parseURL never puts the password into an error.
func parseURL(raw string) (sourceURL, error) {
	var s sourceURL
	bad := func(format string, args ...any) error {
		return backend.Configf("kafka source %s: "+format, append([]any{backend.URLForError(raw)}, args...)...)
	}
	p, ok, err := backend.SplitSourceURL(raw, []string{"kafka", "kafkas"}, false)
	if !ok {
		return s, backend.Configf("kafka source %q: want kafka://host:port?topic=DLQ or kafkas://", backend.URLForError(raw))
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
	if s.brokers, err = parseBrokers(strings.TrimSuffix(p.Hosts, "/"), quote); err != nil {
		return s, bad("%v", err)
	}
	q, err := backend.ParseURLQuery(p.RawQuery, knownParams, backend.StrayAt(raw, p.HasUser))
	if err != nil {
		return s, bad("%v", err)
	}
	s.shareGroup = q.Get("group") // dlq init's (share_init.go)
	if s.topic, s.stateTopic, err = topics(q); err != nil {
		return s, bad("%v", err)
	}
	if s.mechanism, err = mechanism(q.Get("sasl"), s.user); err != nil {
		return s, bad("%v", err)
	}
	q.Duration("timeout", &s.timeout)
	tlsOpts := q.TLS(s.scheme == "kafkas", "kafkas")
	s.tlsCA, s.tlsInsecure, s.tlsServerName = tlsOpts.CA, tlsOpts.Insecure, tlsOpts.ServerName
	if err := q.Err(); err != nil {
		return s, bad("%v", err)
	}
	return s, nil
}

// parseBrokers reads the seed list, host:port[,host:port…].
func parseBrokers(list string, quote func(string) string) ([]string, error) {
	if list == "" {
		return nil, fmt.Errorf("no broker address (want host:port[,host:port…])")
	}
	var brokers []string
	for _, b := range strings.Split(list, ",") {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			return nil, fmt.Errorf("broker %s is not host:port", quote(b))
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("broker %s: bad port", quote(b))
		}
		brokers = append(brokers, b)
	}
	return brokers, nil
}

// topics reads topic= (required) and state_topic= (default
// TOPIC.dlqctl-state).
func topics(q *backend.URLQuery) (topic, state string, err error) {
	topic = q.Get("topic")
	if g := q.Get("group"); topic == "" && g != "" {
		topic = "dlq." + g // a share group's DLQ topic, as dlq init names it
	}
	if topic == "" {
		return "", "", fmt.Errorf("topic= is required (the DLQ topic, e.g. orders.DLT)")
	}
	if err := validTopic(topic); err != nil {
		return "", "", fmt.Errorf("topic=%s: %v", backend.Redacted, err)
	}
	state = q.Get("state_topic")
	if state == "" {
		state = topic + ".dlqctl-state"
	}
	if err := validTopic(state); err != nil {
		return "", "", fmt.Errorf("state_topic=%s: %v", backend.Redacted, err)
	}
	if state == topic {
		return "", "", fmt.Errorf("state_topic must differ from topic")
	}
	return topic, state, nil
}

// mechanism reads sasl=: plain when a user is given and it is not.
func mechanism(sasl, user string) (string, error) {
	m := strings.ToLower(sasl)
	switch m {
	case "":
		if user != "" {
			m = "plain"
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if user == "" {
			return "", fmt.Errorf("sasl=%s needs user:password@ in the URL (or the user there and DLQCTL_KAFKA_PASSWORD)", m)
		}
	default:
		return "", fmt.Errorf("sasl=%s: want plain, scram-sha-256 or scram-sha-512", backend.Redacted)
	}
	return m, nil
}

// validTopic applies Kafka's own rule for topic names. Its errors leave
// t out: it comes from the URL's query, which errors never show.
func validTopic(t string) error {
	if t == "." || t == ".." {
		return errors.New("not a valid topic name")
	}
	if len(t) > 249 {
		return errors.New("longer than 249 characters")
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return errors.New("only letters, digits, '.', '_' and '-' are allowed")
		}
	}
	return nil
}

// Secrets is the URL's password, when it has one.
func (s sourceURL) Secrets() []string {
	if s.password == "" {
		return nil
	}
	return []string{s.password}
}

// Display is the URL with the password replaced by backend.Redacted.
func (s sourceURL) Display() string {
	var b strings.Builder
	b.WriteString(s.scheme + "://")
	if s.user != "" {
		b.WriteString(backend.UserinfoDisplay(s.user, s.password != ""))
	}
	b.WriteString(strings.Join(s.brokers, ","))
	q := url.Values{"topic": {s.topic}}
	if s.stateTopic != s.topic+".dlqctl-state" {
		q.Set("state_topic", s.stateTopic)
	}
	if s.mechanism != "" && s.mechanism != "plain" {
		q.Set("sasl", s.mechanism)
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
	if s.timeout > 0 {
		q.Set("timeout", s.timeout.String())
	}
	b.WriteString("?" + q.Encode())
	return b.String()
}

func (s sourceURL) tlsConfig() (*tls.Config, error) {
	if s.scheme != "kafkas" {
		return nil, nil
	}
	// An empty ServerName is set by the client to each broker's host.
	c, err := backend.TLSOptions{CA: s.tlsCA, Insecure: s.tlsInsecure, ServerName: s.tlsServerName}.Config("")
	if err != nil {
		return nil, backend.Configf("kafka source %s: %v", s.Display(), err)
	}
	return c, nil
}
