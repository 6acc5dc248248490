package kafkadlq

import (
	"crypto/tls"
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

	tlsCA         string
	tlsInsecure   bool
	tlsServerName string
}

var knownParams = map[string]bool{
	"topic": true, "state_topic": true, "sasl": true, "timeout": true,
	"tls_ca": true, "tls_insecure": true, "tls_server_name": true,
}

// parseURL never puts the password into an error.
func parseURL(raw string) (sourceURL, error) {
	var s sourceURL
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "kafka" && scheme != "kafkas") {
		return s, backend.Configf("kafka source %q: want kafka://host:port?topic=DLQ or kafkas://", backend.RedactURL(raw))
	}
	s.scheme = scheme
	authority, query, _ := strings.Cut(rest, "?")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo := authority[:at]
		authority = authority[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err error
		if s.user, err = url.PathUnescape(user); err != nil || s.user == "" {
			return s, backend.Configf("kafka source %s: the user name is empty or badly escaped", backend.RedactURL(raw))
		}
		if hasPass {
			if s.password, err = url.PathUnescape(pass); err != nil {
				return s, backend.Configf("kafka source %s: the password is badly escaped (use %%XX for special characters)", backend.RedactURL(raw))
			}
		}
	}
	authority = strings.TrimSuffix(authority, "/")
	if authority == "" {
		return s, backend.Configf("kafka source %s: no broker address (want host:port[,host:port…])", backend.RedactURL(raw))
	}
	for _, b := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			return s, backend.Configf("kafka source %s: broker %q is not host:port", backend.RedactURL(raw), b)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return s, backend.Configf("kafka source %s: broker %q: bad port", backend.RedactURL(raw), b)
		}
		s.brokers = append(s.brokers, b)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return s, backend.Configf("kafka source %s: bad query: %v", backend.RedactURL(raw), err)
	}
	for k := range q {
		if !knownParams[k] {
			return s, backend.Configf("kafka source %s: unknown parameter %q (known: topic, state_topic, sasl, timeout, tls_ca, tls_insecure, tls_server_name)", backend.RedactURL(raw), k)
		}
	}
	s.topic = q.Get("topic")
	if s.topic == "" {
		return s, backend.Configf("kafka source %s: topic= is required (the DLQ topic, e.g. orders.DLT)", backend.RedactURL(raw))
	}
	if err := validTopic(s.topic); err != nil {
		return s, backend.Configf("kafka source %s: topic: %v", backend.RedactURL(raw), err)
	}
	s.stateTopic = q.Get("state_topic")
	if s.stateTopic == "" {
		s.stateTopic = s.topic + ".dlqctl-state"
	}
	if err := validTopic(s.stateTopic); err != nil {
		return s, backend.Configf("kafka source %s: state_topic: %v", backend.RedactURL(raw), err)
	}
	if s.stateTopic == s.topic {
		return s, backend.Configf("kafka source %s: state_topic must differ from topic", backend.RedactURL(raw))
	}
	s.mechanism = strings.ToLower(q.Get("sasl"))
	switch s.mechanism {
	case "":
		if s.user != "" {
			s.mechanism = "plain"
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if s.user == "" {
			return s, backend.Configf("kafka source %s: sasl=%s needs user:password@ in the URL (or the user there and DLQCTL_KAFKA_PASSWORD)", backend.RedactURL(raw), s.mechanism)
		}
	default:
		return s, backend.Configf("kafka source %s: sasl=%q: want plain, scram-sha-256 or scram-sha-512", backend.RedactURL(raw), q.Get("sasl"))
	}
	if t := q.Get("timeout"); t != "" {
		if s.timeout, err = time.ParseDuration(t); err != nil || s.timeout <= 0 {
			return s, backend.Configf("kafka source %s: timeout=%q: want a positive duration such as 30s", backend.RedactURL(raw), t)
		}
	}
	s.tlsCA, s.tlsServerName = q.Get("tls_ca"), q.Get("tls_server_name")
	if v := q.Get("tls_insecure"); v != "" {
		if s.tlsInsecure, err = strconv.ParseBool(v); err != nil {
			return s, backend.Configf("kafka source %s: tls_insecure=%q: want true or false", backend.RedactURL(raw), v)
		}
	}
	if scheme == "kafka" && (s.tlsCA != "" || s.tlsInsecure || s.tlsServerName != "") {
		return s, backend.Configf("kafka source %s: tls_* parameters need kafkas://", backend.RedactURL(raw))
	}
	return s, nil
}

// validTopic applies Kafka's own rule for topic names.
func validTopic(t string) error {
	if t == "." || t == ".." {
		return fmt.Errorf("%q is not a valid topic name", t)
	}
	if len(t) > 249 {
		return fmt.Errorf("%q is longer than 249 characters", t)
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q: only letters, digits, '.', '_' and '-' are allowed", t)
		}
	}
	return nil
}

// display is the URL with the password replaced by backend.Redacted.
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
		return nil, backend.Configf("kafka source %s: %v", s.display(), err)
	}
	return c, nil
}
