// Package kafkadlq is the Apache Kafka backend (kafka://host:port?topic=T):
// the DLQ is a topic as Spring Kafka, Kafka Connect, Karafka or a
// dlqctl-style producer writes it.
//
// Reading never consumes and never commits a consumer offset: every read
// assigns partitions directly (no consumer group) and reads
// read_committed, from each partition's log start to its last stable
// offset as it was when the read began.
//
// Kafka cannot delete one record, so what dlqctl redrove or resolved is
// recorded in a compacted state topic (default <DLQ>.dlqctl-state, one
// partition, created on first write), keyed by the DLQ entry's locator
// "partition:offset". Every read loads it first and leaves those entries
// out. A redrive writes its records to the origin and its state records
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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

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

// errOpenTxn: a transaction on the state topic stayed open past any time
// the broker should have taken to end it.
var errOpenTxn = errors.New("a transaction on the state topic is still open")

// openTxnLimit is how long a read waits for an open transaction on the
// state topic to end: twice the transaction timeout, and the broker's
// check for timed-out transactions (10 s by default) with room to spare.
func openTxnLimit(txnTTL time.Duration) time.Duration { return 2*txnTTL + 30*time.Second }

const (
	defaultTimeout     = 30 * time.Second
	defaultTxnTimeout  = 20 * time.Second
	defaultLeaseTTL    = 30 * time.Second
	stateTopicPartNum  = 1
	mergeHighWater     = 16384 // records buffered per partition before it is paused (above one fetch)
	mergeLowWater      = 4096
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
	imported  map[string]bool   // dlqctl_source_id of every entry, read on first need
	// firstSeen is, per DLQ partition, the first record the last scan gave
	// out: stats' extras want each partition's oldest remaining record,
	// which that usually is, and a record at an offset never changes.
	firstSeen map[int32]seenRecord
	// claimed is the state topic recorded for this DLT (claim.go), once
	// read.
	claimed string
	// held is the epoch of the DLQ lease taken through this Topic
	// (lease.go), noEpoch when none, lostEpoch once lost.
	held   int64
	stderr io.Writer // Options.Stderr
	// topicID is the DLT's Kafka topic ID when it was opened (identity.go).
	topicID string
	// mismatch and mismatches: state records that disagreed with the
	// record at their locator (identity.go), some by locator, and how many.
	mismatch   map[string]string
	mismatches int
	metaMu     sync.Mutex            // held by readMeta
	metas      map[string]*metaCache // per state topic read (meta.go)
}

// Open parses rawURL, connects and checks that the DLQ topic exists. URL
// mistakes are *backend.ConfigError; no error or String() holds the
// password.
func Open(ctx context.Context, rawURL string, opts Options) (*Topic, error) {
	src, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
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
		return nil, backend.Configf("kafka source %s: %v", src.display(), err)
	}
	from := opts.EventIDFrom
	if from.Kind == "" {
		from.Kind = "property"
	}
	if src.user != "" && pw == "" {
		return nil, backend.Configf("kafka source %s: user %q has no password (give user:pass@, DLQCTL_KAFKA_PASSWORD or the profile's kafka_password)", src.display(), src.user)
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
func (t *Topic) String() string { return t.src.display() }

// TopicName is the DLQ topic.
func (t *Topic) TopicName() string { return t.src.topic }

// StateTopic is the compacted topic recording redriven and resolved entries.
func (t *Topic) StateTopic() string { return t.src.stateTopic }

// Close closes the clients. t.cl stays set, closed: a lease renewal still
// running then fails with the client's ErrClientClosed instead of finding
// no client.
func (t *Topic) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.txn != nil {
		t.txn.Close()
		t.txn = nil
	}
	if t.cl != nil && !t.closed {
		t.cl.Close()
		t.closed = true
	}
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

// partitions is the number of partitions of topic; a topic that does not
// exist is an error naming it.
func (t *Topic) partitions(ctx context.Context, topic string) (int, error) {
	n, _, err := t.topicMeta(ctx, topic)
	return n, err
}

// span is the readable range of one partition: [start, end), end being
// the last stable offset (what read_committed can see).
type span struct {
	partition  int32
	start, end int64
	hwm        int64
}

// leaderWait bounds how long spans waits for partitions whose leader is
// not settled (a broker that just restarted answers before it leads).
const leaderWait = 30 * time.Second

// spans lists each partition's log start, last stable offset and high
// watermark, in partition order. A topic that does not exist has none
// (ok false). A partition without a leader yet is asked again, for up to
// leaderWait, saying so on Stderr after a while.
func (t *Topic) spans(ctx context.Context, topic string) ([]span, bool, error) {
	var done func()
	defer func() {
		if done != nil {
			done()
		}
	}()
	wait := 50 * time.Millisecond
	for start := time.Now(); ; {
		out, ok, err := t.spansOnce(ctx, topic)
		if err == nil || ctx.Err() != nil || time.Since(start) > leaderWait || !leaderless(err) {
			return out, ok, err
		}
		if done == nil {
			done = t.slow(fmt.Sprintf("waiting for the broker to elect the leaders of %s (it restarted?)", topic))
		}
		select {
		case <-ctx.Done():
			return nil, false, t.connErr(ctx, "offsets of "+topic, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// leaderless says whether err is a partition without a settled leader.
func leaderless(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.LeaderNotAvailable) ||
		errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch) ||
		errors.Is(err, kerr.OffsetNotAvailable) || errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorLoadInProgress)
}

func (t *Topic) spansOnce(ctx context.Context, topic string) ([]span, bool, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	starts, err := t.adm.ListStartOffsets(rctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, t.connErr(ctx, "log start offsets of "+topic, err)
	}
	if len(starts[topic]) == 0 {
		return nil, false, nil
	}
	stable, err := t.adm.ListCommittedOffsets(rctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, false, t.connErr(ctx, "last stable offsets of "+topic, err)
	}
	ends, err := t.adm.ListEndOffsets(rctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, false, t.connErr(ctx, "high watermarks of "+topic, err)
	}
	var out []span
	for p, so := range starts[topic] {
		lso, _ := stable.Lookup(topic, p)
		hw, _ := ends.Lookup(topic, p)
		out = append(out, span{partition: p, start: so.Offset, end: lso.Offset, hwm: hw.Offset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].partition < out[j].partition })
	return out, true, nil
}

// reader is a client that reads the given partitions of topic directly
// (no group, nothing committed), read_committed, control records kept so
// that the end of a range is always seen.
func (t *Topic) reader(topic string, from map[int32]int64) (*kgo.Client, error) {
	return t.readerIso(topic, from, kgo.ReadCommitted())
}

// readerIso is reader with the isolation level given: the lease and claim
// records are never transactional, and read_uncommitted sees them behind
// a transaction that a crashed run left open.
func (t *Topic) readerIso(topic string, from map[int32]int64, iso kgo.IsolationLevel) (*kgo.Client, error) {
	o, err := t.baseOpts()
	if err != nil {
		return nil, err
	}
	parts := make(map[int32]kgo.Offset, len(from))
	for p, off := range from {
		parts[p] = kgo.NewOffset().At(off)
	}
	o = append(o,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	return kgo.NewClient(o...)
}

// readRange calls fn for every data record of topic in each partition's
// [from, to) range, partition by partition interleaved as fetched (one
// partition's records in offset order). fn may return backend.ErrStop.
func (t *Topic) readRange(ctx context.Context, topic string, ranges map[int32][2]int64, fn func(*kgo.Record) error) error {
	return t.readRangeIso(ctx, topic, ranges, kgo.ReadCommitted(), fn)
}

// readRangeIso is readRange at the isolation level given.
func (t *Topic) readRangeIso(ctx context.Context, topic string, ranges map[int32][2]int64, iso kgo.IsolationLevel, fn func(*kgo.Record) error) error {
	from := map[int32]int64{}
	for p, r := range ranges {
		if r[0] < r[1] {
			from[p] = r[0]
		}
	}
	if len(from) == 0 {
		return nil
	}
	cl, err := t.readerIso(topic, from, iso)
	if err != nil {
		return err
	}
	defer cl.Close()
	left := len(from)
	done := map[int32]bool{}
	for left > 0 {
		pctx, cancel := context.WithTimeout(ctx, stateIdleTimeout+t.timeout)
		fs := cl.PollFetches(pctx)
		idle := pctx.Err() != nil && fs.NumRecords() == 0
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetchErr(fs); err != nil {
			return t.connErr(ctx, "read "+topic, err)
		}
		if idle {
			// No record within the idle timeout although the range said
			// there were more: what is left was removed (compaction).
			return nil
		}
		var stop error
		fs.EachRecord(func(r *kgo.Record) {
			if stop != nil || done[r.Partition] {
				return
			}
			end := ranges[r.Partition][1]
			if r.Offset >= end {
				done[r.Partition] = true
				left--
				return
			}
			if !r.Attrs.IsControl() {
				if err := fn(r); err != nil {
					stop = err
					return
				}
			}
			if r.Offset >= end-1 {
				done[r.Partition] = true
				left--
			}
		})
		if stop != nil {
			if errors.Is(stop, backend.ErrStop) {
				return nil
			}
			return stop
		}
	}
	return nil
}

// fetchErr is the first real error of a poll (a closed client or a
// cancelled context are the caller's to report).
func fetchErr(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(topic string, p int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrClientClosed) {
			first = fmt.Errorf("partition %d: %w", p, err)
		}
	})
	return first
}

// Status values of state records.
const (
	StatusRedriven = "redriven"
	StatusResolved = "resolved"
)

// leaseKey is the state topic key of the DLQ lease record.
const leaseKey = "dlqctl-lease"

// stateRecord is the value of a state record, keyed by the DLQ entry's
// locator: what happened to the entry, in which run, and where it went.
type stateRecord struct {
	Status      string    `json:"status"`
	RunID       string    `json:"run_id,omitempty"`
	Seq         int64     `json:"seq,omitempty"`
	EventID     string    `json:"event_id,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Dest        string    `json:"dest,omitempty"`
	DestID      string    `json:"dest_id,omitempty"`
	At          time.Time `json:"at"`
	// TopicID is the DLT's Kafka topic ID and RecordTS the record's
	// timestamp (Unix ms): a DLT deleted and made again reuses offsets,
	// and the state of the old topic must not hide the new one's records
	// (identity.go). Absent in records from before they were written.
	TopicID  string `json:"topic_id,omitempty"`
	RecordTS int64  `json:"record_ts,omitempty"`
}

// state is what the state topic holds: the entries taken out of the DLQ
// by locator.
type state struct {
	done *doneSet
}

// doneSet is the entries the state topic takes out of the DLQ, by
// locator. A Topic keeps one and a later loadState adds to it in place
// (copying it per redrive chunk made a run quadratic), so readers go
// through its lock.
type doneSet struct {
	mu sync.RWMutex
	m  map[string]stateRecord
	// byPart holds, per DLQ partition, the offsets of m's entries that are
	// about this topic (no topic ID, or topicID), sorted: Len counts those
	// in each partition's readable range with two binary searches, where
	// going through m per batch made a long redrive quadratic.
	byPart  map[int32][]int64
	topicID string
}

func newDoneSet(topicID string) *doneSet {
	return &doneSet{m: map[string]stateRecord{}, byPart: map[int32][]int64{}, topicID: topicID}
}

// set records id (under mu).
func (d *doneSet) set(id string, r stateRecord) {
	old, had := d.m[id]
	d.m[id] = r
	counts := func(r stateRecord) bool { return r.TopicID == "" || d.topicID == "" || r.TopicID == d.topicID }
	if had && counts(old) == counts(r) {
		return
	}
	p, o, ok := ParseKafkaID(id)
	if !ok {
		return
	}
	if had && counts(old) {
		d.unindex(p, o)
		return
	}
	if counts(r) {
		// State records come mostly in offset order: usually an append.
		offs := d.byPart[p]
		i, found := slices.BinarySearch(offs, o)
		if !found {
			d.byPart[p] = slices.Insert(offs, i, o)
		}
	}
}

// drop forgets id (a tombstone; under mu).
func (d *doneSet) drop(id string) {
	if _, had := d.m[id]; !had {
		return
	}
	delete(d.m, id)
	if p, o, ok := ParseKafkaID(id); ok {
		d.unindex(p, o)
	}
}

func (d *doneSet) unindex(p int32, o int64) {
	offs := d.byPart[p]
	if i, found := slices.BinarySearch(offs, o); found {
		d.byPart[p] = slices.Delete(offs, i, i+1)
	}
}

// countIn is how many entries of this topic the state takes out of
// partition p's offsets [from, to).
func (d *doneSet) countIn(p int32, from, to int64) int64 {
	if d == nil {
		return 0
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	offs := d.byPart[p]
	i, _ := slices.BinarySearch(offs, from)
	j, _ := slices.BinarySearch(offs, to)
	return int64(j - i)
}

// getAt is get for partition:offset, without making the locator string.
func (d *doneSet) getAt(p int32, o int64) (stateRecord, bool) {
	if d == nil {
		return stateRecord{}, false
	}
	var buf [40]byte
	b := strconv.AppendInt(buf[:0], int64(p), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, o, 10)
	d.mu.RLock()
	r, ok := d.m[string(b)]
	d.mu.RUnlock()
	return r, ok
}

// get is the state record of id.
func (d *doneSet) get(id string) (stateRecord, bool) {
	if d == nil {
		return stateRecord{}, false
	}
	d.mu.RLock()
	r, ok := d.m[id]
	d.mu.RUnlock()
	return r, ok
}

// ids lists the locators taken out of the DLQ.
func (d *doneSet) ids() []string {
	if d == nil {
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.m))
	for id := range d.m {
		out = append(out, id)
	}
	return out
}

// stateCache is the state topic as a Topic last read it: up to which
// offset of each partition, and what that held.
type stateCache struct {
	upTo map[int32]int64
	st   state
}

// stateChange is one state record read: an entry's record (nil: a
// tombstone).
type stateChange struct {
	key string
	rec *stateRecord
}

// loadState reads the state topic. With stable, it first waits until no
// transaction is open on it (the last stable offset reaches the high
// watermark): a commit's markers reach the partition a moment after the
// commit returns, and what a crashed run's transaction did is settled only
// once it is committed, or aborted by a resume's fencing or by the broker
// after the transaction timeout. Every read waits so, as only dlqctl
// writes there and its transactions last one chunk.
//
// What was read stays cached in the Topic: a later call asks the broker
// for the offsets again (so it is as fresh as a full read) but reads only
// the records written since. A resume that looks up each open entry, or a
// stats that scans and then reports extras, reads the topic once.
func (t *Topic) loadState(ctx context.Context, stable bool) (state, error) {
	var spans []span
	// The markers of a commit that just returned land within milliseconds:
	// look again soon, then less often (a crashed run's transaction can
	// take the transaction timeout).
	wait := stableWaitFirst
	purged, noted := false, false
	// The run that takes the lease next aborts an open transaction at
	// once, else the broker does after the transaction timeout and its
	// next check for timed-out ones (10 s by default). A transaction open
	// long past that is one the broker is not ending (a coordinator that
	// is not up, or a producer with a far longer timeout): say so rather
	// than wait on it for ever.
	limit := time.Now().Add(openTxnLimit(t.txnTTL))
	nextHangCheck := time.Now().Add(hangCheckAfter)
	for {
		var ok bool
		var err error
		spans, ok, err = t.spans(ctx, t.src.stateTopic)
		if err != nil {
			return state{done: &doneSet{}}, err
		}
		if !ok && !purged {
			// Another dlqctl may have made the state topic since this
			// client last looked: forget what it knows and ask again.
			t.cl.PurgeTopicsFromClient(t.src.stateTopic)
			purged = true
			continue
		}
		if !ok {
			return state{done: &doneSet{}}, nil
		}
		open := false
		for _, s := range spans {
			if s.end < s.hwm {
				open = true
			}
		}
		if !stable || !open {
			break
		}
		if !noted {
			noted = true
			defer t.slow(fmt.Sprintf("waiting for a transaction open on the state topic %s to end (a run killed or cut off inside a chunk: the run that takes the lease next aborts it at once, else the broker after the transaction timeout, %s, and its next check for timed-out transactions)", t.src.stateTopic, t.txnTTL))()
		}
		if time.Now().After(limit) {
			return state{done: &doneSet{}}, t.connErr(ctx, "wait for an open transaction on "+t.src.stateTopic,
				fmt.Errorf("%w: it stayed open for %s, well past the transaction timeout (%s): the broker is not ending it%s", errOpenTxn, openTxnLimit(t.txnTTL), t.txnTTL, t.describeOpenTxns(ctx)))
		}
		if t.holdsLease() && time.Now().After(nextHangCheck) {
			// A hanging transaction ends only by hand: the lease holder
			// settles it (hanging.go).
			nextHangCheck = time.Now().Add(hangCheckAfter)
			n, err := t.settleHanging(ctx)
			if err != nil {
				return state{done: &doneSet{}}, err
			}
			if n > 0 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return state{done: &doneSet{}}, t.connErr(ctx, "wait for an open transaction on "+t.src.stateTopic, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, stableWaitInterval)
	}
	// One read at a time: a second would apply the same records twice.
	t.stateMu.Lock()
	defer t.stateMu.Unlock()
	cached := t.state
	ranges := map[int32][2]int64{}
	fresh := cached == nil
	for _, s := range spans {
		from := s.start
		if !fresh {
			upTo, seen := cached.upTo[s.partition]
			if !seen || upTo > s.end {
				// A partition that is new, or shorter than it was (the
				// topic was deleted and made again): read it all again.
				fresh = true
			} else if upTo > from {
				from = upTo
			}
		}
		ranges[s.partition] = [2]int64{from, s.end}
	}
	if fresh {
		for _, s := range spans {
			ranges[s.partition] = [2]int64{s.start, s.end}
		}
	} else {
		changed := false
		for _, r := range ranges {
			if r[0] < r[1] {
				changed = true
			}
		}
		if !changed {
			return cached.st, nil
		}
	}
	// Collected first and applied only once the read succeeded, so a
	// failed read leaves the cache as it was.
	var changes []stateChange
	err := t.readRange(ctx, t.src.stateTopic, ranges, func(r *kgo.Record) error {
		key := string(r.Key)
		if isMetaKey(key) {
			// Lease and claim records: readMeta's.
			return nil
		}
		if r.Value == nil {
			changes = append(changes, stateChange{key: key})
			return nil
		}
		var sr stateRecord
		if err := json.Unmarshal(r.Value, &sr); err != nil {
			return fmt.Errorf("%s: state topic %s: record %d:%d is not a dlqctl state record: %v", t, t.src.stateTopic, r.Partition, r.Offset, err)
		}
		changes = append(changes, stateChange{key: key, rec: &sr})
		return nil
	})
	if err != nil {
		return state{done: &doneSet{}}, err
	}
	st := state{done: newDoneSet(t.topicID)}
	if !fresh {
		st = cached.st
	}
	st.done.mu.Lock()
	for _, c := range changes {
		if c.rec == nil {
			st.done.drop(c.key)
		} else {
			st.done.set(c.key, *c.rec)
		}
	}
	st.done.mu.Unlock()
	upTo := make(map[int32]int64, len(spans))
	for _, s := range spans {
		upTo[s.partition] = s.end
	}
	t.state = &stateCache{upTo: upTo, st: st}
	return st, nil
}

// ensureStateTopic creates the compacted state topic on first write and
// records it as the DLT's (claim.go).
func (t *Topic) ensureStateTopic(ctx context.Context) error {
	t.mu.Lock()
	up := t.stateUp
	t.mu.Unlock()
	if up {
		return nil
	}
	if err := t.createStateTopic(ctx, t.src.stateTopic); err != nil {
		return err
	}
	if err := t.claim(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	t.stateUp = true
	t.mu.Unlock()
	return nil
}

// createStateTopic makes topic a state topic (one partition, compacted,
// the broker's timestamps) unless it exists.
func (t *Topic) createStateTopic(ctx context.Context, topic string) error {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	cleanup, compactLag, tsType := "compact", "0", logAppendTime
	resp, err := t.adm.CreateTopic(rctx, stateTopicPartNum, -1, map[string]*string{
		"cleanup.policy":         &cleanup,
		"min.compaction.lag.ms":  &compactLag,
		"message.timestamp.type": &tsType,
	}, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		// Made by an older dlqctl, or by an operator: the lease needs the
		// broker's clock on its records.
		if err := t.brokerTimestamps(rctx, topic); err != nil {
			return err
		}
	case err != nil:
		return t.connErr(ctx, "create the state topic "+topic, err)
	}
	// The client caches metadata: a read before the creation would still
	// find the topic missing.
	t.cl.PurgeTopicsFromClient(topic)
	return nil
}

// decode maps a record to an envelope.
func (t *Topic) decode(r *kgo.Record) envelope.Envelope {
	return t.dec.Decode(toKafkaRecord(r))
}

// toKafkaRecord is r for the envelope package. Its headers are r's own,
// seen as KafkaHeader: the two types have the same fields in the
// same order (TestHeaderLayout pins it), and a scan spent a twentieth of
// its CPU copying ten of them per record only to read them once. The
// envelope package reads headers and never keeps or changes the slice.
func toKafkaRecord(r *kgo.Record) KafkaRecord {
	var hs []KafkaHeader
	if len(r.Headers) > 0 {
		hs = unsafe.Slice((*KafkaHeader)(unsafe.Pointer(unsafe.SliceData(r.Headers))), len(r.Headers))
	}
	return KafkaRecord{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp,
	}
}

// mergeKey orders DLQ records: timestamp, then partition, then offset.
type mergeKey struct {
	ts        int64
	partition int32
	offset    int64
}

func (a mergeKey) less(b mergeKey) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.partition != b.partition {
		return a.partition < b.partition
	}
	return a.offset < b.offset
}

func keyOf(r *kgo.Record) mergeKey {
	return mergeKey{ts: r.Timestamp.UnixMilli(), partition: r.Partition, offset: r.Offset}
}

// mergePart is one partition in scanRecords' merge: its records fetched
// and not yet merged, the merge key of the first, and where it ends.
type mergePart struct {
	cl           *kgo.Client // the reader that fetches it
	p            int32
	end          int64 // the offset to read up to
	buf          []*kgo.Record
	head         mergeKey // keyOf(buf[0]) while buf is not empty
	done, paused bool
	seen         bool // a record of it was given out (Topic.firstSeen)
}

func (m *mergePart) push(r *kgo.Record) {
	if len(m.buf) == 0 {
		m.head = keyOf(r)
	}
	m.buf = append(m.buf, r)
}

// pop takes the first record and its key.
func (m *mergePart) pop() (*kgo.Record, mergeKey) {
	r, k := m.buf[0], m.head
	m.buf[0] = nil // the batch it goes to holds it from now on
	m.buf = m.buf[1:]
	if len(m.buf) > 0 {
		m.head = keyOf(m.buf[0])
	}
	return r, k
}

// cursor is where a Scan starts: after one entry in merged order
// ("partition:offset", what list pages with), or from per-partition
// offsets (a Tail watermark, "@p=offset,p=offset").
type cursor struct {
	after   *mergeKey
	minNext map[int32]int64
}

const watermarkPrefix = "@"

func (t *Topic) parseCursor(ctx context.Context, s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	if strings.HasPrefix(s, watermarkPrefix) {
		c := cursor{minNext: map[int32]int64{}}
		body := strings.TrimPrefix(s, watermarkPrefix)
		if body == "" {
			return c, nil
		}
		for _, part := range strings.Split(body, ",") {
			ps, os, ok := strings.Cut(part, "=")
			p, err1 := strconv.ParseInt(ps, 10, 32)
			o, err2 := strconv.ParseInt(os, 10, 64)
			if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
				return c, backend.Configf("%s: cursor %q is not a watermark (@partition=offset,…)", t, s)
			}
			c.minNext[int32(p)] = o
		}
		return c, nil
	}
	p, o, ok := ParseKafkaID(s)
	if !ok {
		return cursor{}, backend.Configf("%s: cursor %q is not a Kafka entry id (partition:offset)", t, s)
	}
	k := mergeKey{partition: p, offset: o}
	r, err := t.fetch(ctx, p, o)
	switch {
	case err == nil:
		k.ts = r.Timestamp.UnixMilli()
	case errors.Is(err, backend.ErrNotFound):
		return cursor{}, backend.Configf("%s: cursor %q: no such entry (expired by retention?)", t, s)
	default:
		return cursor{}, err
	}
	return cursor{after: &k}, nil
}

// Scan reads the DLQ in dead-letter order — every partition at once,
// merged by record timestamp, each partition in offset order — leaving out
// what the state topic records, starting after the cursor `after`. It
// buffers at most some 16,000 records per partition, and decodes on other
// cores while it merges (pipeline.go).
func (t *Topic) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return t.scan(ctx, after, false, fn)
}

// ScanLean is Scan with lean envelopes (backend.LeanScanner): most of the
// CPU a scan spends past reading the records is properties.
func (t *Topic) ScanLean(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return t.scan(ctx, after, true, fn)
}

func (t *Topic) scan(ctx context.Context, after string, lean bool, fn func(envelope.Envelope) error) error {
	c, err := t.parseCursor(ctx, after)
	if err != nil {
		return err
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return err
	}
	return t.scanDecoded(ctx, c, st, lean, fn)
}

// scanRecords is Scan on raw records.
func (t *Topic) scanRecords(ctx context.Context, c cursor, st state, fn func(*kgo.Record) error) error {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return err
	}
	if !ok {
		if t.missing {
			return nil
		}
		return fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	ends := map[int32]int64{}
	from := map[int32]int64{}
	for _, s := range spans {
		start := s.start
		if n, ok := c.minNext[s.partition]; ok && n > start {
			start = n
		}
		if start < s.end {
			from[s.partition] = start
			ends[s.partition] = s.end
		}
	}
	if len(from) == 0 {
		return nil
	}
	// One mergePart per partition that holds records to read, found by
	// partition number through byPart: the loops below run per record.
	var parts []*mergePart
	var byPart []*mergePart
	for p, end := range ends {
		m := &mergePart{p: p, end: end}
		parts = append(parts, m)
		if int(p) >= len(byPart) {
			byPart = append(byPart, make([]*mergePart, int(p)+1-len(byPart))...)
		}
		byPart[p] = m
	}
	slices.SortFunc(parts, func(a, b *mergePart) int { return int(a.p) - int(b.p) })
	// A client fetches from one broker one request at a time, and decodes
	// the response on one goroutine before it asks again: with one
	// client, that goroutine is what a scan waits on. Up to
	// scanReaders clients, each with a share of the partitions, fetch and
	// decode side by side, and each holds at most one fetch the merge has
	// not taken. The client's default of 1 MiB per partition per fetch is
	// kept: the limit counts compressed bytes, and 4 MiB of well-compressed
	// dead letters tripled the peak memory of a scan for no measurable gain.
	nr := min(len(parts), scanReaders)
	share := make([]map[int32]int64, nr)
	for i, m := range parts {
		if share[i%nr] == nil {
			share[i%nr] = map[int32]int64{}
		}
		share[i%nr][m.p] = from[m.p]
	}
	readers := make([]*kgo.Client, 0, nr)
	defer func() {
		for _, cl := range readers {
			cl.Close()
		}
	}()
	for i := range nr {
		cl, err := t.reader(t.src.topic, share[i])
		if err != nil {
			return err
		}
		readers = append(readers, cl)
	}
	for i, m := range parts {
		m.cl = readers[i%nr]
	}
	poll := func(cl *kgo.Client) error {
		pctx, cancel := context.WithTimeout(ctx, stateIdleTimeout+t.timeout)
		fs := cl.PollFetches(pctx)
		idle := pctx.Err() != nil && fs.NumRecords() == 0
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetchErr(fs); err != nil {
			return t.connErr(ctx, "read "+t.src.topic, err)
		}
		if idle {
			// Nothing came although records were due: what is left of
			// those partitions is gone (compaction, retention).
			for _, m := range parts {
				if m.cl == cl && len(m.buf) == 0 {
					m.done = true
				}
			}
			return nil
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition < 0 || int(r.Partition) >= len(byPart) {
				return
			}
			m := byPart[r.Partition]
			if m == nil || m.done {
				return
			}
			if r.Offset >= m.end {
				m.done = true
				return
			}
			if !r.Attrs.IsControl() {
				m.push(r)
			}
			if r.Offset >= m.end-1 {
				m.done = true
			}
		})
		var pause []int32
		for _, m := range parts {
			if m.cl == cl && len(m.buf) >= mergeHighWater && !m.paused && !m.done {
				pause = append(pause, m.p)
				m.paused = true
			}
		}
		if len(pause) > 0 {
			cl.PauseFetchPartitions(map[string][]int32{t.src.topic: pause})
		}
		return nil
	}
	need := true // a partition may have run out of buffered records
	for {
		// Every partition that may still hold records needs its head.
		if need {
			var empty *mergePart
			for _, m := range parts {
				if len(m.buf) == 0 && !m.done {
					if m.paused {
						m.cl.ResumeFetchPartitions(map[string][]int32{t.src.topic: {m.p}})
						m.paused = false
					}
					if empty == nil {
						empty = m
					}
				}
			}
			if empty != nil {
				if err := poll(empty.cl); err != nil {
					return err
				}
				continue
			}
			need = false
		}
		var bm *mergePart
		for _, m := range parts {
			if len(m.buf) > 0 && (bm == nil || m.head.less(bm.head)) {
				bm = m
			}
		}
		if bm == nil {
			return nil
		}
		best, bestKey := bm.pop()
		p := bm.p
		if len(bm.buf) == 0 {
			need = true
		}
		if bm.paused && len(bm.buf) < mergeLowWater {
			bm.cl.ResumeFetchPartitions(map[string][]int32{t.src.topic: {p}})
			bm.paused = false
		}
		if c.after != nil && !c.after.less(bestKey) {
			continue
		}
		if rec, ok := st.done.getAt(p, best.Offset); ok && t.hides(rec, best) {
			continue
		}
		if !bm.seen {
			bm.seen = true
			t.mu.Lock()
			if t.firstSeen == nil {
				t.firstSeen = map[int32]seenRecord{}
			}
			t.firstSeen[p] = seenRecord{offset: best.Offset, ts: best.Timestamp}
			t.mu.Unlock()
		}
		if err := fn(best); err != nil {
			if errors.Is(err, backend.ErrStop) {
				return nil
			}
			return err
		}
	}
}

// seenRecord is a record's offset and timestamp (Topic.firstSeen).
type seenRecord struct {
	offset int64
	ts     time.Time
}

// seenAt is the timestamp of the record at p:o if a scan gave it out first
// in its partition.
func (t *Topic) seenAt(p int32, o int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.firstSeen[p]
	return s.ts, ok && s.offset == o
}

// fetch reads the record at partition:offset of the DLQ topic; it is
// ErrNotFound when that offset is below the log start (retention), at or
// past the last stable offset, or holds no data record.
func (t *Topic) fetch(ctx context.Context, p int32, o int64) (*kgo.Record, error) {
	recs, err := t.fetchMany(ctx, map[int32][]int64{p: {o}})
	if err != nil {
		return nil, err
	}
	r, ok := recs[KafkaID(p, o)]
	if !ok {
		return nil, fmt.Errorf("entry %s: %w in %s", KafkaID(p, o), backend.ErrNotFound, t)
	}
	return r, nil
}

// fetchMany reads the DLQ records at the given offsets, by locator; those
// that are not there are left out. It serves what it can from the records
// the last reads fetched (readahead.go) and reads the rest.
func (t *Topic) fetchMany(ctx context.Context, want map[int32][]int64) (map[string]*kgo.Record, error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return nil, err
	}
	out := map[string]*kgo.Record{}
	if !ok {
		return out, nil
	}
	bySpan := map[int32]span{}
	for _, s := range spans {
		bySpan[s.partition] = s
	}
	type need struct {
		lo, hi int64
		offs   []int64
	}
	needs := map[int32]*need{}
	for p, offs := range want {
		s, ok := bySpan[p]
		if !ok {
			continue
		}
		n := &need{lo: -1, hi: -1}
		for _, o := range offs {
			if o < s.start || o >= s.end {
				continue
			}
			n.offs = append(n.offs, o)
			if n.lo < 0 || o < n.lo {
				n.lo = o
			}
			if o+1 > n.hi {
				n.hi = o + 1
			}
		}
		if n.lo >= 0 {
			needs[p] = n
		}
	}
	read := map[int32][3]int64{}
	for p, n := range needs {
		if w := t.cachedWindow(p, n.lo, n.hi); w != nil {
			w.serve(p, n.offs, out)
			continue
		}
		read[p] = [3]int64{n.lo, n.hi, bySpan[p].end}
	}
	if len(read) == 0 {
		return out, nil
	}
	windows, err := t.readWindows(ctx, read)
	if err != nil {
		return out, err
	}
	for p, w := range windows {
		w.serve(p, needs[p].offs, out)
	}
	return out, nil
}

// Get reads the entry with locator id ("partition:offset"). An entry the
// state topic records as redriven or resolved, or one that retention
// removed, is ErrNotFound. Get waits for a transaction that is open on the
// state topic to end, so that its answer is settled.
func (t *Topic) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	p, o, ok := ParseKafkaID(id)
	if !ok {
		return envelope.Envelope{}, fmt.Errorf("%q is not a Kafka entry id (partition:offset): %w in %s", id, backend.ErrNotFound, t)
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return envelope.Envelope{}, err
	}
	r, err := t.fetch(ctx, p, o)
	if err != nil {
		return envelope.Envelope{}, err
	}
	if rec, ok := st.done.get(id); ok && t.hides(rec, r) {
		return envelope.Envelope{}, fmt.Errorf("entry %s (recorded in %s): %w in %s", id, t.src.stateTopic, backend.ErrNotFound, t)
	}
	return t.decode(r), nil
}

// Len is the number of offsets between each partition's log start and
// last stable offset, less the entries the state topic records there.
// Control records of a transactional dead-letter producer occupy offsets
// too and are counted; Scan's count is exact.
func (t *Topic) Len(ctx context.Context) (int64, error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return 0, err
	}
	if !ok {
		if t.missing {
			return 0, nil
		}
		return 0, fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range spans {
		n += s.end - s.start - st.done.countIn(s.partition, s.start, s.end)
	}
	return max(n, 0), nil
}

// Tail is a watermark of every partition's end ("@p=offset,…"): a Scan
// after it reads only records dead-lettered since, whatever their
// timestamps.
func (t *Topic) Tail(ctx context.Context) (string, error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return "", err
	}
	if !ok {
		if t.missing {
			return "", nil
		}
		return "", fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	parts := make([]string, 0, len(spans))
	for _, s := range spans {
		parts = append(parts, fmt.Sprintf("%d=%d", s.partition, s.end))
	}
	return watermarkPrefix + strings.Join(parts, ","), nil
}
