// Package sqsdlq is the Amazon SQS backend (sqs://QUEUE or the queue URL):
// the DLQ is an SQS queue, standard or FIFO, that other queues' redrive
// policies (or EventBridge, SNS and Lambda) dead-letter into.
//
// SQS has no peek. A scan receives every message (10 per call, several
// receivers in parallel) with a visibility timeout sized to the scan,
// hands them over in dead-letter order, and then makes all of them
// visible again (ChangeMessageVisibility 0, in batches of 10). It never
// deletes. What that costs is in docs/sqs.md: while a scan runs the
// messages are invisible to every other reader of the DLQ, and each scan
// raises every message's receive count on the DLQ by one.
//
// Order: SQS records no dead-letter time. A message keeps its
// SentTimestamp when SQS dead-letters it, so entries are ordered by that
// (then by MessageId); in a FIFO DLQ, by MessageGroupId (groups by their
// oldest message) and by SequenceNumber within a group.
package sqsdlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var (
	_ backend.Source       = (*Queue)(nil)
	_ backend.Importer     = (*Queue)(nil)
	_ backend.Mover        = (*Queue)(nil)
	_ backend.Extras       = (*Queue)(nil)
	_ backend.Leaser       = (*Queue)(nil)
	_ backend.LeaseChecker = (*Queue)(nil)
)

// Options are what Open takes besides the URL.
type Options struct {
	// Fields are the envelope's attribute names and aliases; nil means
	// envelope.DefaultFieldNames.
	Fields envelope.FieldNames
	// EventIDFrom says where the event ID is (--event-id-from
	// attribute:NAME | json:PATH); the zero value reads event_id/eventId.
	EventIDFrom envelope.EventIDSource
	// Client, when set, is used instead of one built from the AWS chain
	// (tests; callers with their own credentials).
	Client *sqs.Client
	// Now is the clock (lease expiry, receipt ages); nil is time.Now.
	Now func() time.Time
}

// Queue is a DLQ held in one SQS queue.
type Queue struct {
	// missing: the DLQ queue did not exist when the Queue was opened.
	missing bool
	src     sourceURL
	names   envelope.FieldNames
	from    envelope.EventIDSource
	c       *sqs.Client
	now     func() time.Time

	url       string
	arn       string
	fifo      bool
	retention time.Duration

	mu sync.Mutex
	// sourceMax caches each source queue's maxReceiveCount, by ARN.
	sourceMax map[string]int
	// destURLs caches destination queue URLs, by the name, ARN or URL given.
	destURLs map[string]string
	// held are the DLQ messages a Publish received and kept invisible for
	// the Remove that follows, by MessageId.
	held map[string]received
	// destMax caches each destination's size limit, by queue URL.
	destMax map[string]limit
	// sentIDs maps a FIFO destination URL and a MessageId SQS answered a
	// send with to that send's MessageDeduplicationId: a later answer with
	// the same MessageId for another deduplication ID was deduplicated.
	sentIDs map[string]string
	// scanVis is the visibility timeout scans receive with (scanVisibility).
	scanVis time.Duration
	// leaseEvery is how often a held lease is renewed (leaseRenew).
	leaseEvery time.Duration
	// handleBound is how many receipt handles a scan keeps in memory.
	handleBound int
	// unseen is how many messages the last full scan could not see: in
	// flight (held by another reader, or by a killed scan or move) when it
	// began, and not received by it.
	unseen int64
	// oldestSent is the oldest SentTimestamp the last full scan saw.
	oldestSent time.Time
	// sourceIDs holds the dlqctl_source_id and MessageId of every message,
	// read by one scan on first need (import).
	sourceIDs map[string]bool
}

// Open parses rawURL, builds a client from the AWS chain (or takes
// opts.Client), and finds the queue: its URL, ARN, FIFO-ness and
// retention. A queue that does not exist is a *backend.ConfigError.
func Open(ctx context.Context, rawURL string, opts Options) (*Queue, error) {
	src, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return openURL(ctx, src, opts)
}

// openURL is Open of a parsed URL.
func openURL(ctx context.Context, src sourceURL, opts Options) (*Queue, error) {
	names, err := opts.Fields.Complete()
	if err != nil {
		return nil, backend.Configf("sqs source %s: %v", src.Display(), err)
	}
	from := opts.EventIDFrom
	if from.Kind == "" {
		from.Kind = "attribute"
	}
	q := &Queue{
		src: src, names: names, from: from, c: opts.Client, now: opts.Now,
		sourceMax: map[string]int{}, destURLs: map[string]string{}, held: map[string]received{}, sentIDs: map[string]string{}, destMax: map[string]limit{},
	}
	if q.now == nil {
		q.now = time.Now
	}
	q.scanVis, q.leaseEvery = scanVisibility, leaseRenew
	q.handleBound = handleBound
	if q.c == nil {
		if q.c, err = newClient(ctx, src); err != nil {
			return nil, err
		}
	}
	if err := q.find(ctx); err != nil {
		if !errors.Is(err, errNoQueue) {
			return nil, err
		}
		// A DLQ that does not exist reads as empty, and says so: check
		// and stats refuse it unless --allow-missing.
		q.missing = true
	}
	return q, nil
}

// errNoQueue: the DLQ queue does not exist.
var errNoQueue = errors.New("does not exist")

// MissingDLQ names the DLQ queue when it did not exist when it was opened
// ("" when it did), after the redacted URL.
func (q *Queue) MissingDLQ() string {
	if !q.missing {
		return ""
	}
	return fmt.Sprintf("%s: the queue %q does not exist", q, q.src.queue)
}

// Notice names a DLQ queue that does not exist (backend.Noticer).
func (q *Queue) Notice() string {
	if !q.missing {
		return ""
	}
	return fmt.Sprintf("%s: the queue %q does not exist: it reads as empty", q, q.src.queue)
}

// credentialsWait bounds the search for credentials: enough for an
// instance role on EC2, whose metadata service answers in milliseconds.
const credentialsWait = 3 * time.Second

// newClient builds an SQS client from the standard AWS chain.
func newClient(ctx context.Context, src sourceURL) (*sqs.Client, error) {
	var lo []func(*config.LoadOptions) error
	if src.region != "" {
		lo = append(lo, config.WithRegion(src.region))
	}
	// The SDK's own log lines (IMDS fallbacks) would come before dlqctl's
	// error and say less.
	lo = append(lo, config.WithLogger(logging.Nop{}))
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, backend.Configf("sqs source %s: AWS configuration: %v", src.Display(), err)
	}
	if cfg.Region == "" {
		return nil, backend.Configf("sqs source %s: no region: add ?region=R or set AWS_REGION", src.Display())
	}
	// Credentials are looked for once, here, with a bound: off EC2 the
	// chain's last resort, the instance metadata service, can take many
	// seconds to fail, and then every request would say so at length.
	cctx, cancel := context.WithTimeout(ctx, credentialsWait)
	_, err = cfg.Credentials.Retrieve(cctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, backend.Configf("sqs source %s: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (ElasticMQ takes any pair, e.g. x and x), or AWS_PROFILE to a profile in ~/.aws", src.Display())
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if src.endpoint != "" {
			o.BaseEndpoint = aws.String(src.endpoint)
		}
	}), nil
}

func (q *Queue) find(ctx context.Context) error {
	q.url = q.src.queueURL
	if q.src.endpoint != "" || q.url == "" {
		in := &sqs.GetQueueUrlInput{QueueName: aws.String(q.src.queue)}
		if q.src.account != "" {
			in.QueueOwnerAWSAccountId = aws.String(q.src.account)
		}
		out, err := q.c.GetQueueUrl(ctx, in)
		if err != nil {
			if isCode(err, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue") {
				return fmt.Errorf("%s: the queue %q %w", q, q.src.queue, errNoQueue)
			}
			return q.wrap(ctx, "find the queue", err)
		}
		q.url = aws.ToString(out.QueueUrl)
	}
	out, err := q.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn, types.QueueAttributeNameFifoQueue, types.QueueAttributeNameMessageRetentionPeriod},
	})
	if err != nil {
		if isCode(err, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue") {
			return fmt.Errorf("%s: the queue %q %w", q, q.src.queue, errNoQueue)
		}
		return q.wrap(ctx, "read the queue's attributes", err)
	}
	q.arn = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	q.fifo = out.Attributes[string(types.QueueAttributeNameFifoQueue)] == "true" || strings.HasSuffix(q.src.queue, ".fifo")
	if s, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMessageRetentionPeriod)]); err == nil {
		q.retention = time.Duration(s) * time.Second
	}
	return nil
}

// String names the DLQ as its URL was given (there is no secret in it).
func (q *Queue) String() string { return q.src.Display() }

// Close releases nothing the SDK keeps open; messages a Publish held and
// no Remove took are made visible again.
func (q *Queue) Close() error {
	q.mu.Lock()
	held := make([]received, 0, len(q.held))
	for _, r := range q.held {
		held = append(held, r)
	}
	q.held = map[string]received{}
	q.mu.Unlock()
	if len(held) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return q.release(ctx, held)
	}
	return nil
}

// QueueURL is the DLQ's queue URL.
func (q *Queue) QueueURL() string { return q.url }

// FIFO reports whether the DLQ is a FIFO queue.
func (q *Queue) FIFO() bool { return q.fifo }

// received is one message as a receive call returned it.
type received struct {
	msg types.Message
	at  time.Time // when it was received (its receipt handle's age)
	vis time.Duration
}

func (r received) id() string { return aws.ToString(r.msg.MessageId) }

// sortKey is what orders a message in a scan (scanStore.less): its
// SentTimestamp and MessageId, and in a FIFO queue its group and
// SequenceNumber.
type sortKey struct {
	group string
	sent  int64
	seq   string
	id    string
}

func keyOf(m types.Message) sortKey {
	sent, _ := strconv.ParseInt(m.Attributes[SQSSentTimestamp], 10, 64)
	return sortKey{group: m.Attributes[SQSMessageGroupID], sent: sent, seq: m.Attributes[SQSSequenceNumber], id: aws.ToString(m.MessageId)}
}

// receiveAll receives every message the queue hands out with the given
// visibility timeout (see receiveInto) and keeps each whole, until want
// reports that everything wanted is in hand. A message received twice
// (its visibility ran out) is kept once, with the newer receipt handle.
//
// ext, when not nil, is given every batch received, to keep it invisible
// while the caller holds it; on an error receiveAll stops it before
// releasing what it took.
func (q *Queue) receiveAll(ctx context.Context, vis time.Duration, ext *extender, want func(map[string]received) bool) ([]received, error) {
	seen := map[string]received{}
	_, _, err := q.receiveInto(ctx, vis, func(msgs []types.Message, at time.Time) bool {
		ext.add(msgs, at, vis)
		for _, m := range msgs {
			seen[aws.ToString(m.MessageId)] = received{msg: m, at: at, vis: vis}
		}
		return want != nil && want(seen)
	}, func() int { return len(seen) })
	all := make([]received, 0, len(seen))
	for _, r := range seen {
		all = append(all, r)
	}
	if err != nil {
		// Give back what was taken before failing.
		ext.stop()
		q.releaseDetached(all)
		return nil, err
	}
	return all, nil
}

// receiveInto receives every message the queue hands out with the given
// visibility timeout, with the source URL's number of parallel receivers,
// until each receiver has had an empty long poll (1 s) or add reports
// that everything wanted is in hand. add (which keeps the messages) and
// have (how many distinct messages are in hand) are called under one
// lock. It returns the queue's counts from before the first receive and,
// when it ended with fewer messages in hand than those counts hold, from
// its end (else nil).
func (q *Queue) receiveInto(ctx context.Context, vis time.Duration, add func([]types.Message, time.Time) bool, have func() int) (start Counts, end *Counts, err error) {
	rs := &receivers{
		q: q, ctx: ctx, vis: vis, add: add, have: have,
		// Receivers stop between calls and a call in flight is never
		// cancelled: messages it was handed would otherwise stay invisible with
		// nobody holding their receipt handles.
		rctx: context.WithoutCancel(ctx),
	}
	// Receivers short-poll. An empty short poll ends a receiver once as
	// many messages are in hand as were visible when it began; before
	// that, it may only have missed the SQS servers holding the rest, so
	// the receiver long-polls (1 s, which asks every server) and ends only
	// when that is empty too.
	start, _, err = q.counts(ctx)
	if err != nil {
		return Counts{}, nil, err
	}
	// In flight counts too: messages a scan just released may still be
	// counted as in flight for a moment (ElasticMQ does so), and a
	// receiver that stopped at the visible count would miss them. Messages
	// that another reader really holds cost one empty long poll.
	rs.expect = start.Visible + start.InFlight
	for round := 0; ; round++ {
		rs.run()
		if rs.first != nil || ctx.Err() != nil || rs.stop || int64(have()) >= rs.expect {
			break
		}
		now, _, err := q.counts(ctx)
		if err != nil {
			return start, nil, err
		}
		end = &now
		// A receiver that ends on an empty long poll has not always seen
		// the queue empty: ElasticMQ now and then answers one with nothing
		// while messages are visible (a 100,000-message scan ended 10
		// short, all of them visible afterwards). Everything this scan
		// received is invisible until it releases it, so a queue that
		// still shows visible messages while fewer than the start count
		// are in hand has more to hand out: the receivers go round again,
		// a few times at most, since new dead letters arriving meanwhile
		// look the same.
		if now.Visible > 0 && round < maxReceiveRounds-1 {
			continue
		}
		// Messages that went in flight during the receive and are not in
		// hand: a receive whose answer never arrived (the SDK asked
		// again, and got other messages) took them with this visibility
		// timeout, so they are visible again within it. The receivers
		// wait that long for them, once; what is still missing then is
		// reported (noteUnseen).
		if !rs.until.IsZero() || !q.lostInFlight(start, now, int64(have())) {
			break
		}
		rs.until = time.Now().Add(vis + lostMargin)
	}
	err = rs.first
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return start, end, q.wrap(ctx, "receive", err)
	}
	if int64(have()) >= rs.expect {
		end = nil
	}
	return start, end, nil
}

// lostMargin is how long past a receive's visibility timeout a scan waits
// for the messages of a receive whose answer was lost.
const lostMargin = time.Second

// lostInFlight says whether more messages are in flight now (end) than
// when the receive began (start), beyond the have that it holds itself
// and those this Queue's moves hold.
func (q *Queue) lostInFlight(start, end Counts, have int64) bool {
	q.mu.Lock()
	own := int64(len(q.held))
	q.mu.Unlock()
	return end.InFlight-have-own > start.InFlight-own
}

// receivers are the parallel receivers of one receiveInto round.
type receivers struct {
	q      *Queue
	ctx    context.Context
	rctx   context.Context // ctx without its cancellation, for the calls
	vis    time.Duration
	add    func([]types.Message, time.Time) bool
	have   func() int
	expect int64 // messages visible or in flight before the first receive

	// until, when set, keeps receivers long-polling while fewer than
	// expect are in hand, until then: the messages of a lost receive are
	// on their way back (see receiveInto).
	until time.Time

	mu    sync.Mutex
	stop  bool
	first error
	// inflight counts receive calls under way.
	inflight int
	wg       sync.WaitGroup
}

// run starts the receivers and waits until each has ended.
func (rs *receivers) run() {
	for range rs.q.src.receivers {
		rs.wg.Add(1)
		go rs.receive()
	}
	rs.wg.Wait()
}

// receive is one receiver: it receives until told to stop or its polls
// come back empty (see receiveInto). It calls rs.wg.Done when it ends.
func (rs *receivers) receive() {
	defer rs.wg.Done()
	wait := int32(0)
	for {
		rs.mu.Lock()
		halt := rs.stop
		rs.inflight++
		rs.mu.Unlock()
		if halt || rs.ctx.Err() != nil {
			return
		}
		out, err := rs.receiveOnce(wait)
		rs.mu.Lock()
		rs.inflight--
		if err != nil {
			if rs.first == nil {
				rs.first = err
			}
			rs.stop = true
			rs.mu.Unlock()
			return
		}
		if len(out.Messages) == 0 {
			short := int64(rs.have()) < rs.expect
			others := rs.inflight > 0
			rs.mu.Unlock()
			left := time.Until(rs.until)
			switch {
			case wait == 0 && short && others:
				// The rest may be what the other receivers' calls
				// are being handed right now: look again after them.
				time.Sleep(10 * time.Millisecond)
			case wait == 0 && short:
				wait = 1
			case short && left > 0:
				// Waiting for a lost receive's messages: long polls
				// short enough that Ctrl-C is not kept waiting.
				wait = int32(min(lostPoll, left.Round(time.Second)+time.Second) / time.Second)
			default:
				return
			}
			continue
		}
		wait = 0
		if rs.add(out.Messages, rs.q.now()) && !rs.stop {
			rs.stop = true
		}
		rs.mu.Unlock()
	}
}

// receiveOnce is one ReceiveMessage call, waiting wait seconds.
func (rs *receivers) receiveOnce(wait int32) (*sqs.ReceiveMessageOutput, error) {
	cctx, cancel := context.WithTimeout(rs.rctx, 30*time.Second)
	defer cancel()
	return rs.q.c.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(rs.q.url),
		MaxNumberOfMessages:         10,
		VisibilityTimeout:           int32(rs.vis / time.Second),
		WaitTimeSeconds:             wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
}

// maxReceiveRounds bounds how often a scan's receivers go round again
// for messages still visible at its end (see receiveInto).
const maxReceiveRounds = 4

// lostPoll is the longest poll of a receiver waiting for a lost
// receive's messages.
const lostPoll = 2 * time.Second

// noteUnseen records, after a full scan that began with counts start,
// ended with counts end (nil when it had all of start in hand) and
// received have messages, how many messages it could not see: the
// shortfall from the count it began with (less this Queue's own, which a
// move holds), as far as they are still in the DLQ. Those were in flight
// when it began (another reader's, a killed scan's or move's), or went in
// flight during it and did not come back in time (a receive whose answer
// was lost, another reader).
func (q *Queue) noteUnseen(start Counts, end *Counts, have int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	own := int64(len(q.held))
	want := start.Visible + start.InFlight - own
	if end != nil {
		want = min(want, end.Visible+end.InFlight-own)
	}
	q.unseen = max(0, want-int64(have))
}

// release makes msgs visible again (visibility 0); see releaseHandles.
func (q *Queue) release(ctx context.Context, msgs []received) error {
	hs := make([]string, len(msgs))
	for i, r := range msgs {
		hs[i] = aws.ToString(r.msg.ReceiptHandle)
	}
	return q.releaseHandles(ctx, hs)
}

// releaseHandles makes the messages of these receipt handles visible
// again (visibility 0), 10 per call, in parallel. A message whose receipt
// handle is no longer valid (deleted or received again since) needs no
// release.
func (q *Queue) releaseHandles(ctx context.Context, handles []string) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, max(q.src.receivers, 1))
	for i := 0; i < len(handles); i += 10 {
		part := handles[i:min(i+10, len(handles))]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(part))
			for j, h := range part {
				entries[j] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: aws.String(h), VisibilityTimeout: 0}
			}
			out, err := q.c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
			if err == nil {
				for _, f := range out.Failed {
					if !staleReceipt(aws.ToString(f.Code)) {
						err = fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
						break
					}
				}
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return q.wrap(ctx, "make the scanned messages visible again", first)
	}
	return nil
}

// releaseDetached releases msgs even when the caller's context has ended
// (Ctrl-C during a scan must not leave the DLQ invisible).
func (q *Queue) releaseDetached(msgs []received) error {
	if len(msgs) == 0 {
		return nil
	}
	// A minute, and more for a large DLQ (a second per 50 messages: a slow
	// server answers a release of 10 in well under that).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(len(msgs)/50)*time.Second)
	defer cancel()
	return q.release(ctx, msgs)
}

func staleReceipt(code string) bool {
	switch code {
	case "ReceiptHandleIsInvalid", "InvalidReceiptHandle", "MessageNotInflight",
		"AWS.SimpleQueueService.MessageNotInflight", "InvalidParameterValue":
		return true
	}
	return false
}

// snapshot receives the whole DLQ into a scanStore, orders it and hands
// it to fn; afterwards (whatever fn returned) it releases every message.
// The messages stay invisible meanwhile: the extender extends their
// visibility while the scan lives.
func (q *Queue) snapshot(ctx context.Context, fn func(*scanStore) error) (err error) {
	n, err := q.Len(ctx)
	if err != nil {
		return err
	}
	st, err := newScanStore(q.handleBound)
	if err != nil {
		return err
	}
	defer st.close()
	st.reserve(n)
	ext := q.startExtender()
	ext.src = st
	defer func() {
		ext.stop()
		if rerr := q.releaseStore(st); rerr != nil && err == nil {
			err = q.wrap(ctx, "make the scanned messages visible again", rerr)
		}
	}()
	start, end, err := q.receiveInto(ctx, q.scanVis, func(msgs []types.Message, at time.Time) bool {
		i, j := st.add(msgs)
		ext.addRange(i, j, at, q.scanVis)
		return false
	}, st.count)
	if err != nil {
		return err
	}
	if err := st.seal(q.fifo); err != nil {
		return err
	}
	q.noteUnseen(start, end, st.count())
	return fn(st)
}

// Scan hands over every message in dead-letter order, starting after the
// MessageId after. SQS can only be read by receiving, so the whole DLQ is
// received first (kept in a temporary file, see scanStore), then handed
// over, then released.
func (q *Queue) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	if q.missing {
		return nil
	}
	return q.snapshot(ctx, func(st *scanStore) error {
		start := 0
		if after != "" {
			start = -1
			for i := range st.index {
				if string(st.id(&st.index[i])) == after {
					start = i + 1
					break
				}
			}
			if start < 0 {
				return fmt.Errorf("%s: cursor %q: no such message in the DLQ any more (redriven or expired since?): %w", q, after, backend.ErrNotFound)
			}
		}
		var oldest int64
		for _, e := range st.index {
			if t := e.sent; t > 0 && (oldest == 0 || t < oldest) {
				oldest = t
			}
		}
		if after == "" {
			q.mu.Lock()
			q.oldestSent = time.Time{}
			if oldest > 0 {
				q.oldestSent = time.UnixMilli(oldest).UTC()
			}
			q.mu.Unlock()
		}
		for i := start; i < len(st.index); i++ {
			m, err := st.message(i)
			if err != nil {
				return err
			}
			if err := fn(q.decode(ctx, m)); err != nil {
				if errors.Is(err, backend.ErrStop) {
					return nil
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
}

// decode maps one message to an envelope.
func (q *Queue) decode(ctx context.Context, m types.Message) envelope.Envelope {
	sm := SQSMessage{
		ID:         aws.ToString(m.MessageId),
		Body:       aws.ToString(m.Body),
		Attributes: m.Attributes,
	}
	for k, v := range m.MessageAttributes {
		if v.BinaryValue != nil || strings.HasPrefix(aws.ToString(v.DataType), "Binary") {
			if sm.BinaryAttributes == nil {
				sm.BinaryAttributes = map[string][]byte{}
			}
			sm.BinaryAttributes[k] = v.BinaryValue
			continue
		}
		if sm.MessageAttributes == nil {
			sm.MessageAttributes = map[string]string{}
		}
		sm.MessageAttributes[k] = aws.ToString(v.StringValue)
	}
	if arn := m.Attributes[SQSDeadLetterSourceArn]; arn != "" {
		sm.SourceMaxReceiveCount = q.sourceMaxReceive(ctx, arn)
	}
	return FromSQS(sm, q.from, q.names)
}

// sourceMaxReceive is the maxReceiveCount of the source queue's redrive
// policy (cached), 0 when it cannot be read.
func (q *Queue) sourceMaxReceive(ctx context.Context, arn string) int {
	q.mu.Lock()
	n, ok := q.sourceMax[arn]
	q.mu.Unlock()
	if ok {
		return n
	}
	if pol, err := q.redrivePolicy(ctx, arn); err == nil {
		n = pol.MaxReceiveCount
	}
	q.mu.Lock()
	q.sourceMax[arn] = n
	q.mu.Unlock()
	return n
}

// Get receives until the message id is in hand (or the DLQ is exhausted),
// then releases everything it received.
func (q *Queue) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	if q.missing {
		return envelope.Envelope{}, fmt.Errorf("%s: %s: %w", q, id, backend.ErrNotFound)
	}
	ext := q.startExtender()
	msgs, err := q.receiveAll(ctx, q.scanVis, ext, func(seen map[string]received) bool { _, ok := seen[id]; return ok })
	if err != nil {
		return envelope.Envelope{}, err
	}
	defer func() { ext.stop(); q.releaseDetached(msgs) }()
	for _, r := range msgs {
		if r.id() == id {
			return q.decode(ctx, r.msg), nil
		}
	}
	return envelope.Envelope{}, fmt.Errorf("message %s: %w in %s", id, backend.ErrNotFound, q)
}

// Unseen is how many messages the last full scan could not see: they were
// in flight (not visible) when it began — held by another reader, or by a
// dlqctl scan or move killed before it released them — and it did not
// receive them. They are in the DLQ all the same: check counts them.
func (q *Queue) Unseen() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.unseen
}

// Counts are the queue's approximate message counts.
type Counts struct {
	Visible  int64 `json:"visible"`
	InFlight int64 `json:"in_flight"`
	Delayed  int64 `json:"delayed"`
}

func (q *Queue) counts(ctx context.Context) (Counts, map[string]string, error) {
	out, err := q.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return Counts{}, nil, q.wrap(ctx, "read the queue's attributes", err)
	}
	num := func(k types.QueueAttributeName) int64 {
		n, _ := strconv.ParseInt(out.Attributes[string(k)], 10, 64)
		return n
	}
	return Counts{
		Visible:  num(types.QueueAttributeNameApproximateNumberOfMessages),
		InFlight: num(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		Delayed:  num(types.QueueAttributeNameApproximateNumberOfMessagesDelayed),
	}, out.Attributes, nil
}

// Len is SQS's approximate count: visible, in flight and delayed messages.
func (q *Queue) Len(ctx context.Context) (int64, error) {
	if q.missing {
		return 0, nil
	}
	c, _, err := q.counts(ctx)
	if err != nil {
		return 0, err
	}
	return c.Visible + c.InFlight + c.Delayed, nil
}

// wrap names the queue and the step in an error; when ctx has ended, the
// error wraps ctx.Err() instead.
func (q *Queue) wrap(ctx context.Context, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%v)", ctxErr, err)
	}
	return fmt.Errorf("%s: %s: %w", q, what, err)
}

// isCode: err is an API error with one of these codes.
func isCode(err error, codes ...string) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	// ElasticMQ (and some SDK paths) qualify the code with its namespace:
	// com.amazonaws.sqs#QueueDoesNotExist.
	code := ae.ErrorCode()
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}
