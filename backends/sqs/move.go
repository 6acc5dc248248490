package sqsdlq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// moveVisibility is how long a Publish keeps the planned messages
// invisible for the Remove that follows it (in the same chunk, within
// seconds); a receipt handle older than moveVisibility minus
// receiptMargin is not trusted and the message is received again. It is
// short because a run killed between the two leaves its messages
// invisible that long, and its resume waits for them (see take).
const (
	moveVisibility = 20 * time.Second
	receiptMargin  = 5 * time.Second
	inFlightPoll   = time.Second
)

// Atomic is false: SendMessageBatch to the destination and
// DeleteMessageBatch on the DLQ are two steps; the journal covers the gap.
func (q *Queue) Atomic() bool { return false }

// DefaultDest is the origin queue's name (from DeadLetterQueueSourceArn).
func (q *Queue) DefaultDest(origin string) string { return origin }

// take receives until every id is in hand (or the DLQ is exhausted) and
// returns them by MessageId; all other messages it received are released
// before it returns. Messages already held by an earlier Publish whose
// receipt handle is still fresh are taken from there.
func (q *Queue) take(ctx context.Context, ids []string) (map[string]received, error) {
	got := map[string]received{}
	var missing []string
	now := q.now()
	q.mu.Lock()
	for _, id := range ids {
		if r, ok := q.held[id]; ok && now.Sub(r.at) < r.vis-receiptMargin {
			got[id] = r
			continue
		}
		missing = append(missing, id)
	}
	q.mu.Unlock()
	if len(missing) == 0 {
		return got, nil
	}
	want := map[string]bool{}
	for _, id := range missing {
		want[id] = true
	}
	// A planned message that is in flight (received by another reader, or
	// by a run or scan killed before it let it go) is not gone: wait for
	// its visibility to run out, up to the longer of a move's and a young
	// scan's visibility timeout and a margin, before calling it not found.
	deadline := q.now().Add(max(moveVisibility, q.scanVis) + receiptMargin)
	taken := 0 // received by this call, in flight now but not in q.held yet
	for {
		msgs, err := q.receiveAll(ctx, "a redrive's receive", moveVisibility, nil, func(seen map[string]received) bool {
			for id := range want {
				if _, ok := seen[id]; !ok {
					return false
				}
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		var others []received
		for _, r := range msgs {
			if want[r.id()] {
				got[r.id()] = r
				delete(want, r.id())
				taken++
			} else {
				others = append(others, r)
			}
		}
		if err := q.release(ctx, others); err != nil {
			return nil, err
		}
		if len(want) == 0 {
			return got, nil
		}
		c, _, err := q.counts(ctx)
		if err != nil {
			return nil, err
		}
		q.mu.Lock()
		own := int64(len(q.held))
		q.mu.Unlock()
		// Delayed messages count with those in flight: they are in the
		// DLQ and cannot be received yet. A resume after the server's
		// restart once called two planned messages gone that were still
		// there, while the in-flight count held only its own.
		if c.InFlight+c.Delayed <= own+int64(taken) {
			return got, nil // the missing ones are not in the DLQ
		}
		if !q.now().Before(deadline) {
			return nil, fmt.Errorf("%s: %d planned messages are not visible while %d messages are in flight or delayed in the DLQ "+
				"(another reader, or a run killed before it deleted them, holds them): try again once their visibility timeout has run out",
				q, len(want), c.InFlight+c.Delayed)
		}
		select {
		case <-time.After(inFlightPoll):
		case <-ctx.Done():
			return nil, q.wrap(ctx, "wait for in-flight messages", ctx.Err())
		}
	}
}

// Publish sends each item's message to item.Dest with SendMessageBatch,
// 10 at a time, in order: the body and message attributes unchanged, with
// redrive_count one higher and the markers dlqctl_run_id, dlqctl_seq and
// dlqctl_redriven_from (see markAttributes for SQS's 10-attribute limit);
// dlqctl_source_id, the import bookkeeping of this DLQ, is dropped. A FIFO
// destination gets the message's MessageGroupId (else its key, else its
// event ID) and a MessageDeduplicationId derived from the run ID and the
// entry (its DLQ MessageId), so that only a resend of the same move inside
// one run (a resume after an unknown outcome) is absorbed by SQS's
// 5-minute deduplication window; another run's redrive of the same event,
// or another DLQ copy of it, is a new message. An answer that shows SQS
// enqueued nothing (no MessageId, or the MessageId SQS gave another entry
// of this process) is a per-item failure, so the DLQ copy is not deleted.
// The planned messages stay received (invisible) for Remove.
//
// Per item, nothing is sent and Err is set when: the message is not in the
// DLQ (ErrNotFound); its fingerprint is not the planned one (ErrChanged);
// it has no destination; the destination refused it, or an earlier item
// for the same destination (so that later entries never overtake it); or
// receiving the planned messages would cost more than the DLQ's own
// redrive policy leaves (readcost.go). A
// failed call (connection lost, server error after the SDK's retries)
// returns an error: the outcome of every item is then unknown.
func (q *Queue) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	got, err := q.take(ctx, ids)
	var costly *readCostError
	if errors.As(err, &costly) {
		// Receiving them would cost more than is safe (readcost.go):
		// refused before anything was sent, each entry stays in the DLQ.
		for i := range results {
			results[i].Err = fmt.Errorf("move %s: not sent: %w", items[i].ID, err)
		}
		return results, nil
	}
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	maps.Copy(q.held, got)
	q.mu.Unlock()
	byDest := map[string][]pendingSend{}
	var dests []string
	for i, it := range items {
		r, ok := got[it.ID]
		if !ok {
			results[i].Err = fmt.Errorf("message %s: %w in %s", it.ID, backend.ErrNotFound, q)
			continue
		}
		dest, p, itemErr, err := q.prepareSend(ctx, i, it, r, m)
		if err != nil {
			return nil, err
		}
		if itemErr != nil {
			results[i].Err = itemErr
			continue
		}
		if _, ok := byDest[dest]; !ok {
			dests = append(dests, dest)
		}
		byDest[dest] = append(byDest[dest], p)
	}
	for _, dest := range dests {
		if err := q.sendTo(ctx, dest, byDest[dest], items, results); err != nil {
			return nil, err
		}
	}
	if err := q.releaseFailed(ctx, items, results); err != nil {
		return nil, err
	}
	return results, nil
}

// pendingSend is one item's entry, ready for a SendMessageBatch: i is the
// item's index, size the entry's size; bare, when set, are its attributes
// without the run markers, for a destination that refuses it as too long.
type pendingSend struct {
	i     int
	entry types.SendMessageBatchRequestEntry
	size  int
	bare  map[string]types.MessageAttributeValue
}

// prepareSend checks item i against the message r received for it and
// builds its entry, with the queue URL it goes to. itemErr is why this item
// is not sent; err is a failure that leaves every item's outcome unknown.
func (q *Queue) prepareSend(ctx context.Context, i int, it backend.MoveItem, r received, m backend.Markers) (dest string, p pendingSend, itemErr, err error) {
	env := q.decode(ctx, r.msg)
	if !strings.EqualFold(env.Fingerprint, it.Fingerprint) {
		return "", p, fmt.Errorf("message %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, env.Fingerprint), nil
	}
	if it.Dest == "" {
		return "", p, fmt.Errorf("move %s: no destination queue (no DeadLetterQueueSourceArn; give --to)", it.ID), nil
	}
	if err := q.GuardDestination(ctx, it.Dest); err != nil {
		return "", p, fmt.Errorf("move %s: %v", it.ID, err), nil
	}
	dest, err = q.destURL(ctx, it.Dest, r.msg)
	if err == nil && dest == q.url {
		err = backend.Configf("%q is this DLQ's queue URL: a redrive never sends to the DLQ it reads", it.Dest)
	}
	if err != nil {
		var ce *backend.ConfigError
		if !errors.As(err, &ce) {
			return "", p, nil, err
		}
		return "", p, fmt.Errorf("move %s: %v", it.ID, err), nil
	}
	limit, err := q.sizeLimit(ctx, dest)
	if err != nil {
		return "", p, nil, err
	}
	entry := types.SendMessageBatchRequestEntry{
		Id:                aws.String(strconv.Itoa(i)),
		MessageBody:       r.msg.Body,
		MessageAttributes: q.markAttributes(r.msg, it, m, true),
	}
	size := messageSize(entry)
	// The run markers are optional (the journal records the run): a
	// message they push over the limit goes without them, and one that
	// a destination of unknown limit refuses is sent again without them.
	bare := entry
	bare.MessageAttributes = q.markAttributes(r.msg, it, m, false)
	if limit.message > 0 && size > limit.message {
		entry = bare
		if size = messageSize(entry); size > limit.message {
			return "", p, fmt.Errorf("move %s: %w: %d bytes with redrive_count raised, over %s's limit of %d bytes",
				it.ID, errTooLarge, size, it.Dest, limit.message), nil
		}
	} else if messageSize(bare) < size {
		p.bare = bare.MessageAttributes
	}
	if isFIFO(dest) {
		group := r.msg.Attributes[SQSMessageGroupID]
		if group == "" {
			group = env.Key
		}
		if group == "" {
			group = env.EventID
		}
		entry.MessageGroupId = aws.String(group)
		entry.MessageDeduplicationId = aws.String(dedupID(m.RunID, it.ID))
	}
	p.i, p.entry, p.size = i, entry, size
	return dest, p, nil, nil
}

// sendTo sends list to dest in batches, in order; once dest refuses an
// entry, the later ones are not sent.
func (q *Queue) sendTo(ctx context.Context, dest string, list []pendingSend, items []backend.MoveItem, results []backend.MoveResult) error {
	var refused error
	for j := 0; j < len(list); {
		// A batch holds at most 10 messages and at most the batch limit
		// in bytes; an entry larger than that goes alone.
		limit, err := q.sizeLimit(ctx, dest)
		if err != nil {
			return err
		}
		k, bytes := j, 0
		for k < len(list) && k-j < 10 && (k == j || bytes+list[k].size <= limit.batch) {
			bytes += list[k].size
			k++
		}
		part := list[j:k]
		j = k
		if refused != nil {
			notSent(part, items, results, refused)
			continue
		}
		if refused, err = q.sendPart(ctx, dest, part, items, results); err != nil {
			return err
		}
		// Once refused, entries of this call after the refused one were
		// already sent; later calls are not.
	}
	return nil
}

// notSent fails the entries of part: dest refused an earlier entry.
func notSent(part []pendingSend, items []backend.MoveItem, results []backend.MoveResult, refused error) {
	for _, p := range part {
		results[p.i].Err = fmt.Errorf("move %s: not sent, as %s refused an earlier entry: %v", items[p.i].ID, items[p.i].Dest, refused)
	}
}

// sendPart sends part to dest as one batch. A batch the destination
// refuses as too long (nothing of it was enqueued) is sent again in two
// halves, in order; an entry refused so alone is sent again without its
// run markers, and then fails alone (errTooLarge: its size, not the
// destination, is at fault, so later entries still go). A limit the
// refusal names is kept for the destination's later batches.
func (q *Queue) sendPart(ctx context.Context, dest string, part []pendingSend, items []backend.MoveItem, results []backend.MoveResult) (refused, err error) {
	refused, err = q.sendBatch(ctx, dest, part, items, results)
	var tl *tooLongError
	if !errors.As(err, &tl) {
		return refused, err
	}
	q.learnLimit(dest, tl, len(part) > 1)
	if len(part) > 1 {
		h := len(part) / 2
		if refused, err = q.sendPart(ctx, dest, part[:h], items, results); refused != nil || err != nil {
			if err == nil {
				notSent(part[h:], items, results, refused)
			}
			return refused, err
		}
		return q.sendPart(ctx, dest, part[h:], items, results)
	}
	p := part[0]
	if p.bare != nil {
		p.entry.MessageAttributes, p.bare = p.bare, nil
		p.size = messageSize(p.entry)
		return q.sendPart(ctx, dest, []pendingSend{p}, items, results)
	}
	results[p.i].Err = fmt.Errorf("move %s: %w: %d bytes with redrive_count raised, refused by %s: %v", items[p.i].ID, errTooLarge, p.size, items[p.i].Dest, tl.msg)
	return nil, nil
}

// sendBatch sends one batch to dest and sets each entry's result; refused
// is the first refusal, if any.
func (q *Queue) sendBatch(ctx context.Context, dest string, part []pendingSend, items []backend.MoveItem, results []backend.MoveResult) (refused, err error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(part))
	byID := make(map[string]types.SendMessageBatchRequestEntry, len(part))
	for k, p := range part {
		entries[k] = p.entry
		byID[aws.ToString(p.entry.Id)] = p.entry
	}
	out, err := q.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(dest), Entries: entries}, sendOnce)
	if tl := asTooLong(err); tl != nil {
		return nil, tl
	}
	if err != nil {
		if isCode(err, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "AccessDenied", "AccessDeniedException",
			"BatchRequestTooLong", "InvalidParameterValue", "UnsupportedOperation", "KmsAccessDenied", "KmsDisabled") {
			for _, p := range part {
				results[p.i].Err = fmt.Errorf("move %s: %s: %v", items[p.i].ID, items[p.i].Dest, err)
			}
			return err, nil
		}
		return nil, q.wrap(ctx, "send to "+items[part[0].i].Dest, err)
	}
	for _, ok := range out.Successful {
		i, err := strconv.Atoi(aws.ToString(ok.Id))
		if err != nil || i < 0 || i >= len(results) {
			continue
		}
		if ferr := q.enqueued(dest, byID[aws.ToString(ok.Id)], aws.ToString(ok.MessageId)); ferr != nil {
			results[i].Err = fmt.Errorf("move %s: %s: %v", items[i].ID, items[i].Dest, ferr)
			if refused == nil {
				refused = ferr
			}
			continue
		}
		results[i].DestID = aws.ToString(ok.MessageId)
	}
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(results) {
			continue
		}
		ferr := fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		if !f.SenderFault {
			// A server-side failure of one entry: SQS did not take it.
			ferr = fmt.Errorf("%w (server side; retry with --retry-failed)", ferr)
		}
		results[i].Err = fmt.Errorf("move %s: %s: %v", items[i].ID, items[i].Dest, ferr)
		if refused == nil {
			refused = ferr
		}
	}
	return refused, nil
}

// sendOnce is the option of a move's SendMessageBatch: the SDK sends it
// again only when the server cannot have enqueued anything, never after a
// lost answer. A send whose answer was lost (a connection dropped, a
// timeout) may have been enqueued: it fails Publish, so the run records
// its entries' outcome as unknown and a resume resends them journaled
// ambiguous (a FIFO destination with the same deduplication IDs). The
// SDK's own retry would send them a second time with no record of it.
// Reads, releases and deletes keep the client's retries.
func sendOnce(o *sqs.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(notEnqueued)}
	})
}

// notEnqueued says which failed sends to retry: those that certainly
// enqueued nothing — a connection that could not be made (the request
// never left), or the server's throttling refusal.
func notEnqueued(err error) aws.Ternary {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return aws.TrueTernary
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		if i := strings.LastIndexByte(code, '#'); i >= 0 {
			code = code[i+1:]
		}
		switch code {
		case "RequestThrottled", "ThrottlingException", "Throttling", "KmsThrottled":
			return aws.TrueTernary
		}
	}
	return aws.FalseTernary
}

// releaseFailed gives back what failed: it is no longer held for a Remove.
func (q *Queue) releaseFailed(ctx context.Context, items []backend.MoveItem, results []backend.MoveResult) error {
	var back []received
	q.mu.Lock()
	for i, it := range items {
		if results[i].Err != nil {
			if r, ok := q.held[it.ID]; ok {
				back = append(back, r)
				delete(q.held, it.ID)
			}
		}
	}
	q.mu.Unlock()
	return q.release(ctx, back)
}

// markAttributes are the message attributes of the redriven message;
// without withMarkers only redrive_count is raised or added (a message the
// run markers would push over the size limit).
//
// SQS allows 10 message attributes. The markers (redrive_count,
// dlqctl_run_id, dlqctl_seq, dlqctl_redriven_from) are written as their own
// attributes when they fit; else all of them go into the one
// dlqctl_fields attribute (a JSON object dlqctl reads back as attributes;
// an existing one is extended); when the message has 10 attributes of its
// own already, none but an existing redrive_count attribute (raised in
// place) is written, and the journal alone records the run.
func (q *Queue) markAttributes(m types.Message, it backend.MoveItem, mk backend.Markers, withMarkers bool) map[string]types.MessageAttributeValue {
	attrs := maps.Clone(m.MessageAttributes)
	if attrs == nil {
		attrs = map[string]types.MessageAttributeValue{}
	}
	delete(attrs, envelope.ImportedFromProperty)
	var packed map[string]string
	if p, ok := attrs[SQSPackedFields]; ok && p.StringValue != nil {
		_ = json.Unmarshal([]byte(*p.StringValue), &packed) // unreadable: treated as empty and left as it is
	}
	rcName, count, inPlace := q.names[envelope.FieldRedriveCount][0], 0, false
	for _, n := range q.names[envelope.FieldRedriveCount] {
		if v, ok := attrs[n]; ok && v.StringValue != nil {
			rcName, inPlace = n, true
			count, _ = strconv.Atoi(*v.StringValue) // unreadable counts as 0
			break
		}
		if v, ok := packed[n]; ok {
			rcName = n
			count, _ = strconv.Atoi(v)
			break
		}
	}
	var marks [][2]string
	if withMarkers {
		marks = [][2]string{
			{backend.MarkerRunID, mk.RunID},
			{backend.MarkerSeq, strconv.FormatInt(it.Seq, 10)},
			{backend.MarkerRedrivenFrom, it.ID},
		}
	}
	rc := strconv.Itoa(count + 1)
	if inPlace {
		attrs[rcName] = strAttr(rc)
	} else {
		marks = append([][2]string{{rcName, rc}}, marks...)
	}
	free := maxAttributes - len(attrs)
	switch {
	case free >= len(marks):
		for _, mk := range marks {
			attrs[mk[0]] = strAttr(mk[1])
		}
	case free >= 1 || packed != nil:
		if packed == nil {
			packed = map[string]string{}
		}
		for _, mk := range marks {
			packed[mk[0]] = mk[1]
		}
		b, _ := json.Marshal(packed) // a map of strings always marshals
		attrs[SQSPackedFields] = strAttr(string(b))
	}
	return attrs
}

// dedupID is a FIFO MessageDeduplicationId (at most 128 characters) for
// one move: the run and the DLQ message it moves. Only a resend of that
// move inside the run has the same ID.
func dedupID(runID, dlqMessageID string) string { return dedupKey("redrive", runID, dlqMessageID) }

// dedupKey hashes its parts into a MessageDeduplicationId.
func dedupKey(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "dlqctl-" + hex.EncodeToString(h[:])
}

// enqueued checks a successful send's answer: SQS enqueued the message
// unless the answer has no MessageId, or (on a FIFO queue, where a
// deduplicated send is answered with the earlier message's MessageId) the
// MessageId is one SQS gave another move of this process.
func (q *Queue) enqueued(dest string, e types.SendMessageBatchRequestEntry, msgID string) error {
	if msgID == "" {
		return errors.New("SQS answered the send without a MessageId: nothing was enqueued")
	}
	if e.MessageDeduplicationId == nil {
		return nil
	}
	key := dest + "\x00" + msgID
	dd := aws.ToString(e.MessageDeduplicationId)
	q.mu.Lock()
	defer q.mu.Unlock()
	if prev, ok := q.sentIDs[key]; ok && prev != dd {
		return fmt.Errorf("SQS answered with MessageId %s, which it gave another move: deduplicated, nothing was enqueued", msgID)
	}
	q.sentIDs[key] = dd
	return nil
}

func isFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }

// destURL resolves a destination given as a queue URL, an ARN or a queue
// name. A bare name is looked up in the account of the message's source
// queue when it names that queue, else in the DLQ's account.
func (q *Queue) destURL(ctx context.Context, dest string, m types.Message) (string, error) {
	q.mu.Lock()
	u, ok := q.destURLs[dest]
	q.mu.Unlock()
	if ok {
		return u, nil
	}
	var name, account string
	switch {
	case strings.HasPrefix(dest, "https://") || strings.HasPrefix(dest, "http://"):
		u = dest
	case strings.HasPrefix(dest, "arn:"):
		name, account = SQSQueueName(dest), arnAccount(dest)
		if name == "" {
			return "", backend.Configf("destination %q is not an SQS queue ARN", dest)
		}
	default:
		name = dest
		if src := m.Attributes[SQSDeadLetterSourceArn]; SQSQueueName(src) == dest {
			account = arnAccount(src)
		} else {
			account = q.src.account
		}
	}
	if u == "" {
		if !validQueueName(name) {
			return "", backend.Configf("destination %q is not an SQS queue name, URL or ARN", dest)
		}
		in := &sqs.GetQueueUrlInput{QueueName: aws.String(name)}
		if account != "" && account != arnAccount(q.arn) {
			in.QueueOwnerAWSAccountId = aws.String(account)
		}
		out, err := q.c.GetQueueUrl(ctx, in)
		if err != nil {
			if isCode(err, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue") {
				return "", backend.Configf("destination queue %q does not exist", dest)
			}
			return "", q.wrap(ctx, "find the destination queue "+dest, err)
		}
		u = aws.ToString(out.QueueUrl)
	}
	q.mu.Lock()
	q.destURLs[dest] = u
	q.mu.Unlock()
	return u, nil
}

func arnAccount(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 {
		return ""
	}
	return parts[4]
}

// Remove deletes each item's message from the DLQ with DeleteMessageBatch,
// using the receipt handle its Publish received, or, when there is none or
// it may have expired, one from receiving it again. A message that is not
// in the DLQ any more gets ErrNotFound. A receipt handle SQS no longer
// accepts makes Remove receive the message again and retry once.
func (q *Queue) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	for attempt := 0; attempt < 2; attempt++ {
		var todo []string
		for i, it := range items {
			if !results[i].Removed && (attempt == 0 || results[i].Err == errStaleReceipt) {
				todo = append(todo, it.ID)
				results[i].Err = nil
			}
		}
		if len(todo) == 0 {
			break
		}
		if attempt > 0 {
			q.mu.Lock()
			for _, id := range todo {
				delete(q.held, id)
			}
			q.mu.Unlock()
		}
		got, err := q.take(ctx, todo)
		if err != nil {
			return nil, err
		}
		stale, err := q.delete(ctx, got)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			if results[i].Removed || !contains(todo, it.ID) {
				continue
			}
			switch _, ok := got[it.ID]; {
			case !ok:
				results[i].Err = fmt.Errorf("message %s: %w in %s", it.ID, backend.ErrNotFound, q)
			case stale[it.ID]:
				results[i].Err = errStaleReceipt
			default:
				results[i].Removed = true
			}
		}
	}
	for i := range results {
		if results[i].Err == errStaleReceipt {
			results[i].Err = fmt.Errorf("message %s: SQS refused its receipt handle twice; it stays in the DLQ", items[i].ID)
		}
	}
	q.mu.Lock()
	for _, id := range ids {
		delete(q.held, id)
	}
	q.mu.Unlock()
	return results, nil
}

var errStaleReceipt = errors.New("stale receipt handle")

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// delete deletes msgs, 10 per call, and returns the MessageIds whose
// receipt handle SQS refused as invalid.
func (q *Queue) delete(ctx context.Context, msgs map[string]received) (map[string]bool, error) {
	stale := map[string]bool{}
	list := make([]received, 0, len(msgs))
	for _, r := range msgs {
		list = append(list, r)
	}
	for i := 0; i < len(list); i += 10 {
		part := list[i:min(i+10, len(list))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(part))
		for j, r := range part {
			entries[j] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: r.msg.ReceiptHandle}
		}
		out, err := q.c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			return nil, q.wrap(ctx, "delete from the DLQ", err)
		}
		for _, f := range out.Failed {
			j, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || j < 0 || j >= len(part) {
				continue
			}
			if staleReceipt(aws.ToString(f.Code)) {
				stale[part[j].id()] = true
				continue
			}
			return nil, q.wrap(ctx, "delete "+part[j].id()+" from the DLQ", fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	return stale, nil
}
