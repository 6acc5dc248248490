// Package pulsardlq is the Apache Pulsar backend (pulsar://…?topic=T): the
// DLQ is a topic read through a durable subscription (default "dlqctl"),
// and its content is the messages that subscription has not acknowledged.
//
// Reading never consumes. The subscription's cursor (mark-delete position
// and individually acknowledged ranges) comes from the admin API
// (internalStats); a Reader then reads the topic from the mark-delete
// position and skips every entry the cursor acknowledged. A partitioned
// DLQ topic is read partition by partition, in partition order (all of
// partition 0, then all of partition 1, …), which is also the order of
// `after` cursors; order within a partition is dead-letter order.
//
// Acknowledgement is per entry. An entry that holds a batch of several
// messages is removed only whole: Publish and Remove refuse, per item, a
// batched message unless every message of its batch is in the same call
// (acking one index alone would, on a broker without
// acknowledgmentAtBatchIndexLevelEnabled — the default, standalone
// included — drop its siblings from the DLQ). Batches that another consumer
// acknowledged in part, on a broker with batch-index acknowledgement on,
// are not visible through the admin API and still show whole. dlqctl's own
// producers (import, redrive) never batch.
package pulsardlq

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var (
	_ backend.Source   = (*Topic)(nil)
	_ backend.Importer = (*Topic)(nil)
	_ backend.Extras   = (*Topic)(nil)
	_ backend.Mover    = (*Topic)(nil)
	_ backend.Tailer   = (*Topic)(nil)
)

// Options are what Open takes besides the URL.
type Options struct {
	// Token authenticates to the broker and the admin API
	// (DLQCTL_PULSAR_TOKEN or DLQCTL_PULSAR_TOKEN_FILE, read by the caller).
	Token string
	// Fields are the envelope's property names and aliases; nil means
	// envelope.DefaultFieldNames. A field missing from the map keeps its
	// default names.
	Fields envelope.FieldNames
	// EventIDFrom says where the event ID is (--event-id-from); the zero
	// value reads the event_id/eventId property.
	EventIDFrom envelope.EventIDSource
	// OperationTimeout bounds the client's lookups and producer/consumer
	// creation (default 30s); every call is also bound by its ctx.
	OperationTimeout time.Duration
	// SendTimeout bounds one redrive send (default 30s).
	SendTimeout time.Duration
	// Logger receives the Pulsar client's logs; nil discards them, so that
	// nothing but dlqctl's own output reaches the terminal.
	Logger plog.Logger
}

const (
	defaultOperationTimeout = 30 * time.Second
	defaultSendTimeout      = 30 * time.Second
	scanQueueSize           = 500
)

// Topic is a DLQ held in one Pulsar topic and read through one durable
// subscription.
type Topic struct {
	src         sourceURL
	topic       topicName
	sub         string
	names       envelope.FieldNames
	from        envelope.EventIDSource
	token       string
	sendTimeout time.Duration

	client pulsar.Client
	admin  *admin

	mu sync.Mutex
	// partitions is the DLQ topic's partition count (0: not partitioned).
	partitions int
	// missing: the topic did not exist when the Topic was opened.
	missing  bool
	importer onceProducer
	// producers are the redrive producers, by run producer name and
	// destination topic.
	producers map[[2]string]redriveProducer
	// ackers acknowledge on the DLQ subscription, one per (partition)
	// topic; they never receive.
	ackers map[string]pulsar.Consumer
	// sourceIDs holds the dlqctl_source_id of every pending message, read
	// by one scan on first need (import).
	sourceIDs map[string]bool
	// removed is dlqctl's own record of what it acknowledged (removals.go).
	removed removals
	// cameBack counts, as of Open, the acknowledged entries a broker
	// crash brought back.
	cameBack int
}

// Open parses rawURL, checks through the admin API that the broker
// answers, creates the DLQ subscription at the earliest message if it is
// missing (without consuming), and connects the client. URL mistakes are
// *backend.ConfigError; no error or String() holds the token.
func Open(ctx context.Context, rawURL string, opts Options) (*Topic, error) {
	src, err := parseURL(rawURL)
	if err != nil {
		return nil, scrub(err, opts.Token)
	}
	return openURL(ctx, src, opts)
}

// openURL is Open of a parsed URL.
func openURL(ctx context.Context, src sourceURL, opts Options) (*Topic, error) {
	t, err := open(ctx, src, opts)
	if err != nil {
		return nil, scrub(err, opts.Token)
	}
	return t, nil
}

func open(ctx context.Context, src sourceURL, opts Options) (*Topic, error) {
	names, err := opts.Fields.Complete()
	if err != nil {
		return nil, backend.Configf("pulsar source %s: %v", src.Display(), err)
	}
	from := opts.EventIDFrom
	if from.Kind == "" {
		from.Kind = "property"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if src.admin.Scheme == "https" {
		if tr.TLSClientConfig, err = src.adminTLS(); err != nil {
			return nil, err
		}
	}
	t := &Topic{
		src:         src,
		topic:       src.topic,
		sub:         src.subscription,
		names:       names,
		from:        from,
		token:       opts.Token,
		sendTimeout: orDefault(opts.SendTimeout, orDefault(src.timeout, defaultSendTimeout)),
		admin:       newAdmin(src.admin, opts.Token, tr),
		producers:   map[[2]string]redriveProducer{},
		ackers:      map[string]pulsar.Consumer{},
	}
	if t.partitions, err = t.admin.partitions(ctx, t.topic); err != nil {
		return nil, t.connErr(ctx, "admin API "+src.admin.Redacted(), err)
	}
	if t.partitions == 0 {
		// A topic that does not exist is created (empty) by the
		// subscription below; remember that it was not there, so that
		// check and stats can say so instead of reporting a green 0.
		if _, err := t.admin.stats(ctx, t.topic, false); errors.Is(err, errAdminNotFound) {
			t.missing = true
		}
	}
	if err := t.admin.createSubscription(ctx, t.topic, t.sub); err != nil {
		return nil, t.connErr(ctx, "create the subscription "+t.sub, err)
	}
	co := pulsar.ClientOptions{
		URL:               src.serviceURL(),
		ConnectionTimeout: 10 * time.Second,
		OperationTimeout:  orDefault(opts.OperationTimeout, orDefault(src.timeout, defaultOperationTimeout)),
		Logger:            opts.Logger,
	}
	if co.Logger == nil {
		co.Logger = plog.DefaultNopLogger()
	}
	if opts.Token != "" {
		co.Authentication = pulsar.NewAuthenticationToken(opts.Token)
	}
	if src.tls() {
		co.TLSTrustCertsFilePath = src.tlsCA
		co.TLSAllowInsecureConnection = src.tlsInsecure
		co.TLSValidateHostname = src.tlsHostname
	}
	if t.client, err = pulsar.NewClient(co); err != nil {
		return nil, backend.Configf("%s: %v", t, err)
	}
	// The client connects lazily: a lookup checks the broker URL now.
	if err := t.lookup(ctx); err != nil {
		t.client.Close()
		return nil, err
	}
	if !t.missing {
		if t.cameBack, err = t.CameBack(ctx); err != nil {
			t.client.Close()
			return nil, err
		}
	}
	return t, nil
}

// lookup asks the broker for the topic's partitions, within ctx.
func (t *Topic) lookup(ctx context.Context) error {
	_, err := withCtx(ctx, func() ([]string, error) { return t.client.TopicPartitions(t.topic.String()) }, nil)
	if err != nil {
		return t.connErr(ctx, "connect", err)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// MissingDLQ names the DLQ topic when it did not exist when opened ("" when
// it did), after the redacted URL.
func (t *Topic) MissingDLQ() string {
	if !t.missing {
		return ""
	}
	return fmt.Sprintf("%s: topic %s does not exist", t, t.topic)
}

// Notice says that the DLQ topic did not exist, when it did not, and
// when entries dlqctl acknowledged came back after a broker crash.
func (t *Topic) Notice() string {
	if t.missing {
		return fmt.Sprintf("topic %s does not exist on %s: reading it as an empty DLQ (check ?topic=)", t.topic, t)
	}
	if t.cameBack > 0 {
		return cameBackNote(t.cameBack)
	}
	return ""
}

// String is the source URL; it never holds the token.
func (t *Topic) String() string { return t.src.Display() }

// Close closes the producers, the acknowledging consumers and the client.
func (t *Topic) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.producers {
		p.Close()
	}
	for _, c := range t.ackers {
		c.Close()
	}
	if t.importer.Producer != nil {
		t.importer.Close()
	}
	t.removed.mu.Lock()
	if t.removed.producer != nil {
		t.removed.producer.Close()
		t.removed.producer = nil
	}
	t.removed.mu.Unlock()
	t.producers, t.ackers, t.importer = map[[2]string]redriveProducer{}, map[string]pulsar.Consumer{}, onceProducer{}
	if t.client != nil {
		t.client.Close()
		t.client = nil
	}
	t.admin.http.CloseIdleConnections()
	return nil
}

// TopicName is the DLQ topic's full name.
func (t *Topic) TopicName() string { return t.topic.String() }

// Subscription is the DLQ subscription.
func (t *Topic) Subscription() string { return t.sub }

// part is one topic to read: the DLQ topic itself (index -1) or one of its
// partitions.
type part struct {
	name  topicName
	index int32
}

// parts lists the topics to read, in order. The partition count is read
// again each time, as partitions can be added.
func (t *Topic) parts(ctx context.Context) ([]part, error) {
	n, err := t.admin.partitions(ctx, t.topic)
	if err != nil {
		return nil, t.connErr(ctx, "partitions", err)
	}
	t.mu.Lock()
	t.partitions = n
	t.mu.Unlock()
	if n == 0 {
		return []part{{name: t.topic, index: -1}}, nil
	}
	out := make([]part, n)
	for i := range out {
		out[i] = part{name: t.topic.partition(i), index: int32(i)}
	}
	return out, nil
}

// firstTopic is the DLQ topic, or its first partition when it is
// partitioned: where what dlqctl keeps once per DLQ lives.
func (t *Topic) firstTopic() topicName {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.partitions > 0 {
		return t.topic.partition(0)
	}
	return t.topic
}

// partOf is the topic that holds messages of partition index p.
func (t *Topic) partOf(p int32) (part, bool) {
	t.mu.Lock()
	n := t.partitions
	t.mu.Unlock()
	switch {
	case n == 0 && p == -1:
		return part{name: t.topic, index: -1}, true
	case n > 0 && p >= 0 && int(p) < n:
		return part{name: t.topic.partition(int(p)), index: p}, true
	}
	return part{}, false
}

func (t *Topic) cursor(ctx context.Context, p part) (cursor, error) {
	st, err := t.admin.internalStats(ctx, p.name)
	if err != nil {
		return cursor{}, t.connErr(ctx, "internal stats of "+p.name.String(), err)
	}
	c, err := newCursor(st, t.sub)
	if err != nil {
		return cursor{}, fmt.Errorf("%s: %s: %w", t, p.name, err)
	}
	if err := t.loadRemovals(ctx); err != nil {
		return cursor{}, err
	}
	return t.withRemovals(p.index, c), nil
}

// Scan reads the pending messages oldest first, partition by partition,
// starting after the message id `after`. It holds at most the reader's
// receive queue in memory and stops at the last message the topic had when
// each partition's read began.
func (t *Topic) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	var from *msgID
	if after != "" {
		id, ok := parseMsgID(after)
		if !ok {
			return backend.Configf("%s: cursor %q is not a Pulsar message id (ledger:entry:partition:batch)", t, after)
		}
		from = &id
	}
	parts, err := t.parts(ctx)
	if err != nil {
		return err
	}
	if from != nil {
		if _, ok := t.partOf(from.partition); !ok {
			return backend.Configf("%s: cursor %q names partition %d, which this topic does not have", t, after, from.partition)
		}
	}
	for _, p := range parts {
		if from != nil && p.index < from.partition {
			continue
		}
		var in *msgID
		if from != nil && p.index == from.partition {
			in = from
		}
		err := t.scanPart(ctx, p, in, fn)
		if errors.Is(err, backend.ErrStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Topic) scanPart(ctx context.Context, p part, after *msgID, fn func(envelope.Envelope) error) error {
	c, err := t.cursor(ctx, p)
	if err != nil {
		return err
	}
	start := c.markDelete
	if after != nil {
		// A batch cursor leaves the rest of its entry to read.
		skip := after.position
		if after.batch >= 0 {
			skip.entry--
		}
		if start.less(skip) {
			start = skip
		}
	}
	if !start.less(c.lastConfirmed) && c.lastConfirmed.entry >= 0 {
		return nil
	}
	r, err := t.reader(ctx, p, start, scanQueueSize)
	if err != nil {
		return err
	}
	defer r.Close()
	last, err := lastOf(ctx, r)
	if err != nil {
		return t.connErr(ctx, "last message id of "+p.name.String(), err)
	}
	if last.entry < 0 || !start.less(last) {
		return nil
	}
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return t.connErr(ctx, "read "+p.name.String(), err)
		}
		id := idOf(m.ID(), p.index)
		ended := !id.position.less(last) && lastInEntry(m.ID())
		if start.less(id.position) && !c.acked(id.position) && !before(id, after) {
			if err := fn(t.decode(m, id)); err != nil {
				return err
			}
		}
		if ended {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// before: id is at or before the cursor after (same partition).
func before(id msgID, after *msgID) bool {
	if after == nil {
		return false
	}
	if id.position != after.position {
		return id.position.less(after.position)
	}
	return after.batch < 0 || id.batch <= after.batch
}

// lastInEntry: m is the last message of its entry.
func lastInEntry(id pulsar.MessageID) bool {
	return id.BatchSize() <= 1 || id.BatchIdx() >= id.BatchSize()-1
}

// reader opens a Reader that starts after the entry at start.
//
// The client's exclusive start at LEDGER:ENTRY with batch index -1 also
// returns that entry's messages; callers skip them by position.
func (t *Topic) reader(ctx context.Context, p part, start position, queue int) (pulsar.Reader, error) {
	r, err := withCtx(ctx, func() (pulsar.Reader, error) {
		return t.client.CreateReader(pulsar.ReaderOptions{
			Topic:                  p.name.String(),
			StartMessageID:         pulsar.NewMessageID(start.ledger, start.entry, -1, -1),
			ReceiverQueueSize:      queue,
			SubscriptionRolePrefix: "dlqctl-read",
		})
	}, pulsar.Reader.Close)
	if err != nil {
		return nil, t.connErr(ctx, "open a reader on "+p.name.String(), err)
	}
	return r, nil
}

// lastOf is the reader's topic's last message position (entry -1: empty).
func lastOf(ctx context.Context, r pulsar.Reader) (position, error) {
	id, err := withCtx(ctx, r.GetLastMessageID, nil)
	if err != nil {
		return position{}, err
	}
	return position{id.LedgerID(), id.EntryID()}, nil
}

// idOf is the locator of a message read from partition index partition.
func idOf(id pulsar.MessageID, partition int32) msgID {
	batch := int32(-1)
	if id.BatchSize() > 1 {
		batch = id.BatchIdx()
	}
	return msgID{position: position{id.LedgerID(), id.EntryID()}, partition: partition, batch: batch}
}

func (t *Topic) decode(m pulsar.Message, id msgID) envelope.Envelope {
	return FromPulsar(PulsarMessage{
		ID:              id.String(),
		Topic:           m.Topic(),
		Key:             m.Key(),
		OrderingKey:     m.OrderingKey(),
		Properties:      m.Properties(),
		Payload:         m.Payload(),
		EventTime:       unixMillis(m.EventTime()),
		PublishTime:     unixMillis(m.PublishTime()),
		RedeliveryCount: m.RedeliveryCount(),
	}, t.from, t.names)
}

// unixMillis maps the client's "0 ms since the epoch" (not set) to the
// zero time.
func unixMillis(ts time.Time) time.Time {
	if ts.UnixMilli() == 0 {
		return time.Time{}
	}
	return ts
}

// Get reads the pending message with locator id.
func (t *Topic) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	m, mid, err := t.getMessage(ctx, id, nil)
	if err != nil {
		return envelope.Envelope{}, err
	}
	return t.decode(m, mid), nil
}

// getMessage reads the pending message id; cursors caches the partitions'
// cursors for a batch of calls (nil: read afresh).
func (t *Topic) getMessage(ctx context.Context, id string, cursors map[int32]cursor) (pulsar.Message, msgID, error) {
	mid, ok := parseMsgID(id)
	if !ok {
		return nil, mid, fmt.Errorf("%q is not a Pulsar message id (ledger:entry:partition:batch): %w in %s", id, backend.ErrNotFound, t)
	}
	p, ok := t.partOf(mid.partition)
	if !ok {
		if _, err := t.parts(ctx); err != nil {
			return nil, mid, err
		}
		if p, ok = t.partOf(mid.partition); !ok {
			return nil, mid, fmt.Errorf("message %s: no partition %d: %w in %s", id, mid.partition, backend.ErrNotFound, t)
		}
	}
	c, ok := cursors[mid.partition]
	if !ok {
		var err error
		if c, err = t.cursor(ctx, p); err != nil {
			return nil, mid, err
		}
		if cursors != nil {
			cursors[mid.partition] = c
		}
	}
	if !c.pending(mid.position) {
		return nil, mid, fmt.Errorf("message %s: %w in %s", id, backend.ErrNotFound, t)
	}
	r, err := t.reader(ctx, p, position{mid.ledger, mid.entry - 1}, 10)
	if err != nil {
		return nil, mid, err
	}
	defer r.Close()
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return nil, mid, t.connErr(ctx, "read "+id, err)
		}
		got := idOf(m.ID(), mid.partition)
		switch {
		case got.position.less(mid.position):
			continue
		case got.position != mid.position:
			return nil, mid, fmt.Errorf("message %s: %w in %s", id, backend.ErrNotFound, t)
		case got.batch == mid.batch || (mid.batch == 0 && got.batch == -1):
			return m, got, nil
		case got.batch < mid.batch && !lastInEntry(m.ID()):
			continue
		}
		return nil, mid, fmt.Errorf("message %s: %w in %s (its entry holds %d messages)", id, backend.ErrNotFound, t, max(1, m.ID().BatchSize()))
	}
}

// Len is the subscription's backlog (msgBacklog, summed over partitions).
// Pulsar counts it in entries: a batch of several messages counts once.
func (t *Topic) Len(ctx context.Context) (int64, error) {
	st, err := t.subStats(ctx)
	if err != nil {
		return 0, err
	}
	back, err := t.CameBack(ctx)
	if err != nil {
		return 0, err
	}
	return max(0, st.MsgBacklog-int64(back)), nil
}

func (t *Topic) subStats(ctx context.Context) (subscriptionStats, error) {
	t.mu.Lock()
	partitioned := t.partitions > 0
	t.mu.Unlock()
	st, err := t.admin.stats(ctx, t.topic, partitioned)
	if errors.Is(err, errAdminNotFound) && !partitioned {
		// Made partitioned since Open? Read the count again once.
		if ps, perr := t.parts(ctx); perr == nil && ps[0].index >= 0 {
			st, err = t.admin.stats(ctx, t.topic, true)
		}
	}
	if err != nil {
		return subscriptionStats{}, t.connErr(ctx, "stats", err)
	}
	ss, ok := st.Subscriptions[t.sub]
	if !ok {
		return subscriptionStats{}, fmt.Errorf("%s: the subscription %q does not exist (deleted since dlqctl created it?)", t, t.sub)
	}
	return ss, nil
}

// Tail is the newest message's locator, "" when the topic is empty. On a
// partitioned topic there is no single newest message that a Scan could
// continue after, so Tail is "" there too: readers of what arrived later
// then read the whole DLQ.
func (t *Topic) Tail(ctx context.Context) (string, error) {
	t.mu.Lock()
	partitioned := t.partitions > 0
	t.mu.Unlock()
	if partitioned {
		return "", nil
	}
	last, err := t.admin.lastMessageID(ctx, t.topic)
	if err != nil {
		return "", t.connErr(ctx, "last message id", err)
	}
	if last.EntryID < 0 {
		return "", nil
	}
	return msgID{position: position{last.LedgerID, last.EntryID}, partition: -1, batch: -1}.String(), nil
}

// connErr names the source and the step in an error from the broker or
// the admin API; when ctx has ended, the error wraps ctx.Err() instead.
func (t *Topic) connErr(ctx context.Context, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		// What failed below is the deadline or Ctrl-C, whatever it says.
		err = ctxErr
	}
	return scrub(fmt.Errorf("%s: %s: %w", t, what, err), t.token)
}

// scrub hides secrets in an error's text (backend.Scrub).
func scrub(err error, secrets ...string) error { return backend.Scrub(err, secrets...) }
