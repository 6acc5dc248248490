package sqsdlq

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// Source URLs:
//
//	sqs://QUEUE[?region=R][&endpoint=URL][&account=ID][&receivers=N][&lease_settle=DUR][&max_message_size=N]
//	https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE[?same options but region/endpoint]
//
// QUEUE is the DLQ's name (FIFO names end in .fifo). region defaults to
// the AWS chain's (AWS_REGION, the shared config's profile). endpoint is
// an SQS-compatible server (ElasticMQ, LocalStack) or a VPC endpoint.
// account is the queue owner's account ID, for a queue in another account
// than the credentials'. receivers is how many receive calls run in
// parallel during a scan (default 4, 1-32). lease_settle is how long a
// run waits after writing the lease tag before reading it back (default
// 2s). max_message_size is the message and batch size limit, in bytes
// (or NKiB, NMiB), of destination queues that report no
// MaximumMessageSize (SQS-compatible servers such as ElasticMQ, which
// takes 1MiB); without it such a destination refuses what is too long
// itself. Credentials never go in the URL: they come from the standard AWS
// chain (environment, shared config and profiles, SSO, instance and task
// roles).

var knownParams = []string{"account", "endpoint", "lease_settle", "max_message_size", "receivers", "region"}

const (
	defaultReceivers   = 4
	maxReceivers       = 32
	defaultLeaseSettle = 2 * time.Second
)

// sourceURL is a parsed SQS source URL.
type sourceURL struct {
	raw         string
	queue       string
	region      string
	endpoint    string
	account     string
	queueURL    string // set when the URL is the queue URL itself
	receivers   int
	leaseSettle time.Duration
	// maxMessageSize is max_message_size=, 0 when not given.
	maxMessageSize int
}

// Display is the URL as given: it holds no secret (credentials come from
// the AWS chain).
func (u sourceURL) Display() string { return u.raw }

// Secrets is nothing: credentials never pass through the URL.
func (u sourceURL) Secrets() []string { return nil }

// queueURLHost is an AWS SQS endpoint host: sqs.REGION.amazonaws.com (and
// .com.cn), or the legacy REGION.queue.amazonaws.com.
var queueURLHost = regexp.MustCompile(`^(?:sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?|([a-z0-9-]+)\.queue\.amazonaws\.com(?:\.cn)?)$`)

var (
	queueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	accountID = regexp.MustCompile(`^[0-9]{12}$`)
)

func validQueueName(name string) bool {
	base, fifo := strings.CutSuffix(name, ".fifo")
	if fifo {
		return len(name) <= 80 && queueName.MatchString(base)
	}
	return queueName.MatchString(name)
}

// claims says whether raw is SQS's to read: any sqs:// URL, and an https
// URL whose host is an AWS SQS endpoint, so that another backend may serve
// other https URLs.
func claims(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	return u.Scheme == "sqs" || u.Scheme == "https" && queueURLHost.MatchString(u.Host)
}

// parseURL reads an sqs:// URL or an https:// SQS queue URL. Every error
// is a *backend.ConfigError; none quotes user info.
func parseURL(raw string) (sourceURL, error) {
	u := sourceURL{receivers: defaultReceivers, leaseSettle: defaultLeaseSettle}
	pu, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		reason := err
		if errors.As(err, &ue) {
			reason = ue.Err
		}
		return u, backend.Configf("sqs source %s: not a valid URL: %v", backend.URLForError(raw), reason)
	}
	if strings.Contains(raw, "#") {
		// url.Parse would drop it, and the display form is the URL as given.
		return u, backend.Configf("sqs source %s: a fragment (#) is not allowed", backend.URLForError(raw))
	}
	if pu.User != nil {
		return u, backend.Configf("sqs source %s: user info in the URL is not supported; credentials come from the AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, instance roles)", backend.URLForError(raw))
	}
	// A piece quoted in an error may hold a password's end when the URL
	// has an '@' its user info does not account for.
	quote := func(v string) string { return backend.QuoteURLPiece(raw, false, v) }
	q, err := backend.ParseURLQuery(pu.RawQuery, knownParams, backend.StrayAt(raw, false))
	if err != nil {
		return u, backend.Configf("sqs source %s: %v", backend.URLForError(raw), err)
	}
	switch pu.Scheme {
	case "sqs":
		err = u.readSQS(pu, q, quote)
	case "https":
		err = u.readQueueURL(pu, q, quote)
	default:
		err = fmt.Errorf("unknown scheme %s (want sqs:// or an https:// SQS queue URL)", quote(pu.Scheme))
	}
	if err != nil {
		return u, backend.Configf("sqs source %s: %v", backend.URLForError(raw), err)
	}
	q.Int("receivers", 1, maxReceivers, &u.receivers)
	if q.Has("lease_settle") {
		d, err := time.ParseDuration(q.Get("lease_settle"))
		if err != nil || d < 0 || d > time.Minute {
			q.Fail("lease_settle", "a duration from 0s to 1m")
		}
		u.leaseSettle = d
	}
	if q.Has("max_message_size") {
		if u.maxMessageSize = parseBytes(q.Get("max_message_size")); u.maxMessageSize < 1024 || u.maxMessageSize > 1024*1024 {
			q.Fail("max_message_size", "a size from 1024 to 1048576 bytes (or 1KiB to 1MiB), SQS's range of MaximumMessageSize")
		}
	}
	if err := q.Err(); err != nil {
		return u, backend.Configf("sqs source %s: %v", backend.URLForError(raw), err)
	}
	u.raw = raw
	return u, nil
}

// readSQS reads sqs://QUEUE and its region, endpoint and account.
func (u *sourceURL) readSQS(pu *url.URL, q *backend.URLQuery, quote func(string) string) error {
	if pu.Opaque != "" || pu.Host == "" {
		return errors.New("want sqs://QUEUE?region=R")
	}
	if pu.Path != "" && pu.Path != "/" {
		return fmt.Errorf("unexpected path %s (want sqs://QUEUE, or the queue URL itself)", quote(pu.Path))
	}
	// url.Parse lowercases nothing, but a queue name is no host name:
	// take it verbatim.
	u.queue = pu.Host
	if !validQueueName(u.queue) {
		return fmt.Errorf("%s is not an SQS queue name (1-80 letters, digits, - and _, .fifo for FIFO queues)", quote(u.queue))
	}
	u.region = q.Get("region")
	if e := q.Get("endpoint"); e != "" {
		eu, err := url.Parse(e)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" || eu.User != nil {
			q.Fail("endpoint", "http://HOST:PORT or https://HOST (no user info)")
			return q.Err()
		}
		u.endpoint = strings.TrimRight(e, "/")
	}
	if a := q.Get("account"); a != "" {
		if !accountID.MatchString(a) {
			q.Fail("account", "a 12-digit AWS account ID")
			return q.Err()
		}
		u.account = a
	}
	return nil
}

// readQueueURL reads an https:// SQS queue URL, which names the region,
// account and queue itself.
func (u *sourceURL) readQueueURL(pu *url.URL, q *backend.URLQuery, quote func(string) string) error {
	m := queueURLHost.FindStringSubmatch(pu.Host)
	if m == nil {
		return fmt.Errorf("https URLs are read as SQS queue URLs (https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE), and %s is no SQS host; for another endpoint use sqs://QUEUE?endpoint=URL", quote(pu.Host))
	}
	u.region = m[1] + m[2]
	parts := strings.Split(strings.Trim(pu.Path, "/"), "/")
	if len(parts) != 2 || !accountID.MatchString(parts[0]) || !validQueueName(parts[1]) {
		return fmt.Errorf("want https://%s/ACCOUNT/QUEUE (a 12-digit account ID and a queue name)", pu.Host)
	}
	u.account, u.queue = parts[0], parts[1]
	for _, k := range []string{"region", "endpoint", "account"} {
		if q.Has(k) {
			return fmt.Errorf("%s= does not go with a queue URL, which names it already", k)
		}
	}
	u.queueURL = "https://" + pu.Host + "/" + u.account + "/" + u.queue
	return nil
}

func (u sourceURL) String() string { return fmt.Sprintf("sqs queue %s", u.queue) }

// parseBytes reads N, NKiB or NMiB; 0 for anything else.
func parseBytes(v string) int {
	mult := 1
	switch {
	case strings.HasSuffix(v, "KiB"):
		v, mult = strings.TrimSuffix(v, "KiB"), 1024
	case strings.HasSuffix(v, "MiB"):
		v, mult = strings.TrimSuffix(v, "MiB"), 1024*1024
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 1<<30/mult {
		return 0
	}
	return n * mult
}
