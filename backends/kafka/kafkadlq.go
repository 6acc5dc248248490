// Package kafkadlq is the Apache Kafka backend (kafka://host:port?topic=T):
// the DLQ is a topic as Spring Kafka, Kafka Connect, Karafka or a
// dlqctl-style producer writes it, or as the broker writes it for a share
// group (share.go: the records are read back from their source).
//
// Reading never consumes and never commits a consumer offset: every read
// assigns partitions directly (no consumer group) and reads
// read_committed, from each partition's log start to its last stable
// offset as it was when the read began.
//
// Kafka cannot delete one record, so what dlqctl redrove or resolved is
// recorded in a state topic that keeps every record (default
// <DLQ>.dlqctl-state, one partition, created on first write), keyed by
// the DLQ entry's locator "partition:offset"; only the records dlqctl
// wrote count (provenance.go). Every read loads it first and leaves those
// entries out. A redrive writes its records to the origin and its state records
// in one Kafka transaction, so an entry is either back on its origin and
// gone from the DLQ, or neither.
//
// Order: Scan merges the partitions by record timestamp (then partition,
// then offset), which is dead-letter order, and never reorders one
// partition.
package kafkadlq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var (
	_ backend.Source       = (*Topic)(nil)
	_ backend.Importer     = (*Topic)(nil)
	_ backend.Mover        = (*Topic)(nil)
	_ backend.Tailer       = (*Topic)(nil)
	_ backend.Leaser       = (*Topic)(nil)
	_ backend.LeaseChecker = (*Topic)(nil)
	_ backend.Extras       = (*Topic)(nil)
)

// Options are what Open takes besides the URL.
type Options struct {
	// Password authenticates with SASL when the URL names a user but no
	// password (DLQCTL_KAFKA_PASSWORD or the profile's kafka_password).
	Password string
	// Fields are the envelope's header names and aliases; nil means
	// envelope.DefaultFieldNames.
	Fields envelope.FieldNames
	// EventIDFrom says where the event ID is (--event-id-from); the zero
	// value reads the event_id/eventId header.
	EventIDFrom envelope.EventIDSource
	// Timeout bounds each request to the brokers (default 30s, or the
	// URL's timeout=); every call is also bound by its ctx.
	Timeout time.Duration
	// TransactionTimeout is how long the broker keeps a redrive's
	// transaction open when its producer dies (default 20s): a resume
	// fences it at once, any other reader waits at most this long.
	TransactionTimeout time.Duration
	// LeaseTTL is how long a DLQ lease lasts without renewal (default 30s).
	LeaseTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Stderr is told what a step that takes long waits for; nil discards
	// it.
	Stderr io.Writer
}

const (
	defaultTimeout     = 30 * time.Second
	defaultTxnTimeout  = 20 * time.Second
	defaultLeaseTTL    = 30 * time.Second
	stateTopicPartNum  = 1
	mergeHighWater     = 4096 // records buffered per partition before it is paused (above one fetch of the client's 1 MiB)
	mergeLowWater      = 1024
	scanReaders        = 4 // clients a scan reads with, each a share of the partitions
	stateIdleTimeout   = 10 * time.Second
	stableWaitFirst    = 5 * time.Millisecond
	stableWaitInterval = 100 * time.Millisecond
)

// Topic is a DLQ held in one Kafka topic.
type Topic struct {
	src sourceURL
	// missing: the DLQ topic did not exist when the Topic was opened.
	missing  bool
	names    envelope.FieldNames
	dec      *KafkaDecoder
	password string
	timeout  time.Duration
	txnTTL   time.Duration
	leaseTTL time.Duration
	now      func() time.Time

	cl     *kgo.Client // admin requests and plain produces (import, resolve, lease)
	closed bool        // cl is closed (Close)
	adm    *kadm.Client

	mu sync.Mutex
	// txn holds the transactional producer of the run in progress, keyed
	// by its transactional ID.
	txn       *kgo.Client
	txnID     string
	stateUp   bool              // the state topic is known to exist
	stateMu   sync.Mutex        // held by loadState
	state     *stateCache       // the state topic as last read (loadState, under stateMu)
	windows   map[int32]*window // per DLQ partition, the records last fetched (readahead.go)
	destParts map[string]int    // partitions of each redrive destination (destPartitions)
	// shareHeld is, per source partition, the oldest record a header-only
	// share-group dead letter was rebuilt from (share_retention.go).
	shareHeld map[sourcePartition]heldRecord
	imported  map[string]bool // dlqctl_source_id of every entry, read on first need
	// firstSeen is, per DLQ partition, the first record the last scan gave
	// out: stats' extras want each partition's oldest remaining record,
	// which that usually is, and a record at an offset never changes.
	firstSeen map[int32]seenRecord
	// claimed is the state topic recorded for this DLT (claim.go), once
	// read.
	claimed string
	// held is the epoch of the DLQ lease taken through this Topic
	// (lease.go), noEpoch when none, lostEpoch once lost; lostTo names the
	// run it was lost to, once known.
	held   int64
	lostTo string
	stderr io.Writer // Options.Stderr
	// topicID is the DLT's Kafka topic ID when it was opened (identity.go).
	topicID string
	// mismatch and mismatches: state records that disagreed with the
	// record at their locator (identity.go), some by locator, and how many.
	mismatch   map[string]string
	mismatches int
	metaMu     sync.Mutex            // held by readMeta
	metas      map[string]*metaCache // per state topic read (meta.go)
	// meta writes the lease, claim and format records; metaID is its
	// transactional ID once named (provenance.go).
	meta   metaProducer
	metaID string
	// runID is the run that took the lease through this Topic.
	runID string
	// guarded is, per redrive destination asked about, why it holds dlqctl
	// bookkeeping ("" when it does not) (guard.go).
	guarded map[string]string
	// made holds the state topics this Topic made or set up: they exist,
	// whatever a broker that has not heard of them yet says (spans).
	made map[string]bool
}

// Open parses rawURL, connects and checks that the DLQ topic exists. URL
// mistakes are *backend.ConfigError; no error or String() holds the
// password.
func Open(ctx context.Context, rawURL string, opts Options) (*Topic, error) {
	src, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return openURL(ctx, src, opts)
}

// openURL is Open of a parsed URL.
func openURL(ctx context.Context, src sourceURL, opts Options) (*Topic, error) {
	pw := src.password
	if pw == "" {
		pw = opts.Password
	}
	t, err := open(ctx, src, pw, opts)
	if err != nil {
		return nil, backend.Scrub(err, pw)
	}
	return t, nil
}

func open(ctx context.Context, src sourceURL, pw string, opts Options) (*Topic, error) {
	names, err := opts.Fields.Complete()
	if err != nil {
		return nil, backend.Configf("kafka source %s: %v", src.Display(), err)
	}
	from := opts.EventIDFrom
	if from.Kind == "" {
		from.Kind = "property"
	}
	if src.shareGroup != "" {
		return nil, backend.Configf("kafka source %s: group= is for dlq init (it sets the share group's DLQ up); read the DLQ with topic=", src.Display())
	}
	if src.user != "" && pw == "" {
		return nil, backend.Configf("kafka source %s: user %q has no password (give user:pass@, DLQCTL_KAFKA_PASSWORD or the profile's kafka_password)", src.Display(), src.user)
	}
	t := &Topic{
		src: src, names: names, dec: NewKafkaDecoder(from, names), password: pw,
		timeout:  orDefault(opts.Timeout, orDefault(src.timeout, defaultTimeout)),
		txnTTL:   orDefault(opts.TransactionTimeout, defaultTxnTimeout),
		leaseTTL: orDefault(opts.LeaseTTL, defaultLeaseTTL),
		now:      opts.Now,
		held:     noEpoch,
		stderr:   opts.Stderr,
	}
	if t.now == nil {
		t.now = time.Now
	}
	base, err := t.baseOpts()
	if err != nil {
		return nil, err
	}
	if t.cl, err = kgo.NewClient(base...); err != nil {
		return nil, backend.Configf("%s: %v", t, err)
	}
	t.adm = kadm.NewClient(t.cl)
	if _, t.topicID, err = t.topicMeta(ctx, t.src.topic); err != nil {
		if !errors.Is(err, errNoTopic) {
			t.cl.Close()
			return nil, t.explain(err)
		}
		// A DLQ topic that does not exist reads as empty, and says so:
		// check and stats refuse it unless --allow-missing.
		t.missing = true
	}
	if err := t.checkClaim(ctx); err != nil {
		t.cl.Close()
		return nil, err
	}
	return t, nil
}

// explain says what to fix when the first request failed on a credential
// or a certificate; other errors are returned as they are. err already
// names the source.
func (t *Topic) explain(err error) error {
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var notTLS tls.RecordHeaderError
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState), errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("%w: authentication failed for user %q with sasl=%s: check the password (user:pass@, DLQCTL_KAFKA_PASSWORD or the profile's kafka_password)",
			err, t.src.user, t.src.mechanism)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("%w: the broker's TLS certificate is signed by an authority this machine does not trust: give its CA with tls_ca=FILE", err)
	case errors.As(err, &badHost):
		return fmt.Errorf("%w: the broker's TLS certificate is not for the address dialled: set tls_server_name=NAME to the name it is for", err)
	case errors.As(err, &notTLS):
		return fmt.Errorf("%w: the listener did not answer in TLS: use kafka:// for a plaintext listener", err)
	}
	return err
}

// errNoTopic: the topic does not exist.
var errNoTopic = errors.New("does not exist")

// MissingDLQ names the DLQ topic when it did not exist when it was opened
// ("" when it did), after the redacted URL.
func (t *Topic) MissingDLQ() string {
	if !t.missing {
		return ""
	}
	return fmt.Sprintf("%s: topic %q does not exist", t, t.src.topic)
}

// Notice names a DLQ topic that does not exist (backend.Noticer).
func (t *Topic) Notice() string {
	if !t.missing {
		return ""
	}
	return fmt.Sprintf("%s: topic %q does not exist: it reads as empty", t, t.src.topic)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// baseOpts are the connection options every client of this Topic shares.
func (t *Topic) baseOpts() ([]kgo.Opt, error) {
	o := []kgo.Opt{
		kgo.SeedBrokers(t.src.brokers...),
		kgo.RetryTimeout(t.timeout),
		kgo.DialTimeout(10 * time.Second),
		kgo.ClientID("dlqctl"),
		// Topics that another dlqctl creates (the state topic) are seen
		// within a second.
		kgo.MetadataMinAge(time.Second),
	}
	tc, err := t.src.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		o = append(o, kgo.DialTLSConfig(tc))
	}
	switch t.src.mechanism {
	case "plain":
		o = append(o, kgo.SASL(plain.Auth{User: t.src.user, Pass: t.password}.AsMechanism()))
	case "scram-sha-256":
		o = append(o, kgo.SASL(scram.Auth{User: t.src.user, Pass: t.password}.AsSha256Mechanism()))
	case "scram-sha-512":
		o = append(o, kgo.SASL(scram.Auth{User: t.src.user, Pass: t.password}.AsSha512Mechanism()))
	}
	return o, nil
}

// String is the source URL; it never holds the password.
func (t *Topic) String() string { return t.src.Display() }

// TopicName is the DLQ topic.
func (t *Topic) TopicName() string { return t.src.topic }

// StateTopic is the topic recording redriven and resolved entries.
func (t *Topic) StateTopic() string { return t.src.stateTopic }

// Close closes the clients. t.cl stays set, closed: a lease renewal still
// running then fails with the client's ErrClientClosed instead of finding
// no client.
func (t *Topic) Close() error {
	t.mu.Lock()
	if t.txn != nil {
		t.txn.Close()
		t.txn = nil
	}
	if t.cl != nil && !t.closed {
		t.cl.Close()
		t.closed = true
	}
	t.mu.Unlock()
	// Not under mu: a meta write holds the meta producer's lock and then
	// takes mu.
	t.closeMeta()
	return nil
}

// connErr names the source and the step; when ctx has ended, the error
// wraps ctx.Err() instead of what the client made of it.
func (t *Topic) connErr(ctx context.Context, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	return backend.Scrub(fmt.Errorf("%s: %s: %w", t, what, err), t.password)
}
