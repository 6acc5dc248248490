package pulsardlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// routingProps are the properties a redrive drops: they steer the
// clients' retry and dead-letter machinery, not the event, and would
// misroute or miscount the message on its original topic.
//
//	REAL_TOPIC, REAL_SUBSCRIPTION   where it was dead-lettered from: now
//	                                the destination itself
//	ORIGIN_MESSAGE_ID (Java),       its message id there
//	ORIGIN_MESSAGE_IDY_TIME (Go)
//	RECONSUMETIMES                  the retry counter: a consumer with
//	                                retry on would count on from it and
//	                                send the event straight back
//	DELAY_TIME, RETRY_TOPIC         retry-topic scheduling
//	dlqctl_source_id                this DLQ's import bookkeeping
//	pulsar.ordering_key,            restored as the message's ordering
//	pulsar.event_time               key and event time instead
var routingProps = []string{
	"REAL_TOPIC", "REAL_SUBSCRIPTION", "ORIGIN_MESSAGE_ID", "ORIGIN_MESSAGE_IDY_TIME",
	"RECONSUMETIMES", "DELAY_TIME", "RETRY_TOPIC", SourceIDProperty,
	PropOrderingKey, PropEventTime,
}

// Atomic is false: the send to the destination and the acknowledgement on
// the DLQ subscription are two steps; the redrive journal covers the gap.
func (t *Topic) Atomic() bool { return false }

var partitionSuffix = regexp.MustCompile(`-partition-[0-9]+$`)

// DefaultDest is the origin topic; a REAL_TOPIC that names one partition
// of a partitioned topic goes back to the whole topic, whose router then
// places it by key.
func (t *Topic) DefaultDest(origin string) string {
	return partitionSuffix.ReplaceAllString(origin, "")
}

// Publish sends each item's message to item.Dest, synchronously, in order.
//
// Each message keeps its payload, key, ordering key, event time and
// properties (minus routingProps), with redrive_count one higher and the
// markers dlqctl_run_id, dlqctl_seq and dlqctl_redriven_from. The producer
// of a destination is named m.ProducerName and every message carries
// SequenceID item.Seq, so that where the namespace has deduplication on,
// the broker drops a resend of a message it already has (the receipt then
// has no message id and DestID says "deduplicated").
//
// Per item, nothing is sent and Err is set when: the message is no longer
// pending (ErrNotFound); its fingerprint is not item.Fingerprint
// (ErrChanged); it is in a batch whose other messages are not all in this
// call (see the package comment); the destination refused an earlier item
// of this call (so that entries sharing a key never overtake one another);
// or the destination refuses it (no such topic, not authorized, too
// large). A timeout or a lost connection returns an error: the outcome of
// every item is then unknown.
func (t *Topic) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	locators := make([]string, len(items))
	for i, it := range items {
		locators[i] = it.ID
	}
	msgs, ids, errs, err := t.readPending(ctx, locators)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		if errs[i] != nil {
			results[i].Err = errs[i]
			msgs[i] = nil
			continue
		}
		msg, id := msgs[i], ids[i]
		env := t.decode(msg, id)
		if !strings.EqualFold(env.Fingerprint, it.Fingerprint) {
			results[i].Err = fmt.Errorf("message %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, env.Fingerprint)
			msgs[i] = nil
			continue
		}
		if it.Dest == "" {
			results[i].Err = fmt.Errorf("move %s: no destination topic (no REAL_TOPIC; give --to)", it.ID)
			msgs[i] = nil
			continue
		}
	}
	checkBatches(items, msgs, ids, results)
	refused := map[string]error{}
	for i, it := range items {
		if msgs[i] == nil || results[i].Err != nil {
			continue
		}
		if err := refused[it.Dest]; err != nil {
			results[i].Err = fmt.Errorf("move %s: not sent, as %s refused an earlier entry of this batch: %v", it.ID, it.Dest, err)
			continue
		}
		p, err := t.producer(ctx, it.Dest, m.ProducerName)
		if err != nil {
			if !definite(err) {
				return nil, t.connErr(ctx, "create a producer on "+it.Dest, err)
			}
			refused[it.Dest] = err
			results[i].Err = fmt.Errorf("move %s: %s: %v", it.ID, it.Dest, err)
			continue
		}
		sent, err := p.send(ctx, redriveMessage(msgs[i], ids[i], it, m, t.names))
		if err != nil {
			if !definite(err) {
				return nil, t.connErr(ctx, "send "+it.ID+" to "+it.Dest, err)
			}
			refused[it.Dest] = err
			results[i].Err = fmt.Errorf("move %s: %s: %v", it.ID, it.Dest, err)
			continue
		}
		results[i].DestID = destID(sent, p.partitioned)
	}
	return results, nil
}

// destID is the destination's message id, ledger:entry:partition:batch
// as the client reports it; a resend that deduplication dropped has none.
func destID(id pulsar.MessageID, partitioned bool) string {
	if id.LedgerID() < 0 || id.EntryID() < 0 {
		return "deduplicated"
	}
	batch := int32(-1)
	if id.BatchSize() > 1 {
		batch = id.BatchIdx()
	}
	part := int32(-1)
	if partitioned {
		part = id.PartitionIdx()
	}
	return msgID{position: position{id.LedgerID(), id.EntryID()}, partition: part, batch: batch}.String()
}

// definite: the broker or client refused this message or destination for
// good (it was not written), as opposed to an unknown outcome.
func definite(err error) bool {
	var pe *pulsar.Error
	if errors.As(err, &pe) {
		switch pe.Result() {
		case pulsar.TopicNotFound, pulsar.AuthorizationError, pulsar.AuthenticationError,
			pulsar.MessageTooBig, pulsar.InvalidMessage, pulsar.TopicTerminated,
			pulsar.ProducerBlockedQuotaExceededException, pulsar.ProducerBlockedQuotaExceededError,
			pulsar.InvalidTopicName, pulsar.SchemaFailure, pulsar.OperationNotSupported:
			return true
		}
	}
	// The broker's refusals of a producer arrive as text naming the
	// server error.
	return refusal.MatchString(err.Error())
}

var refusal = regexp.MustCompile(`\b(TopicNotFound|AuthorizationError|AuthenticationError|ProducerBusy|NotAllowedError|TopicTerminatedError|IncompatibleSchema|InvalidTopicName|ProducerBlockedQuotaExceeded(Error|Exception))\b`)

// checkBatches refuses, per item, a batched message whose batch is not
// wholly in this call (see the package comment).
func checkBatches(items []backend.MoveItem, msgs []pulsar.Message, ids []msgID, results []backend.MoveResult) {
	type entry struct {
		partition int32
		pos       position
	}
	have := map[entry]map[int32]bool{}
	for i := range items {
		if msgs[i] != nil && results[i].Err == nil && ids[i].batch >= 0 {
			e := entry{ids[i].partition, ids[i].position}
			if have[e] == nil {
				have[e] = map[int32]bool{}
			}
			have[e][ids[i].batch] = true
		}
	}
	for i, it := range items {
		if msgs[i] == nil || results[i].Err != nil || ids[i].batch < 0 {
			continue
		}
		size := msgs[i].ID().BatchSize()
		if got := have[entry{ids[i].partition, ids[i].position}]; int32(len(got)) < size {
			results[i].Err = fmt.Errorf("message %s is one of a batch of %d in entry %s, and only %d of them are in this step: "+
				"Pulsar acknowledges the entry whole, so the batch moves only together (select all of it, in one batch of the redrive)",
				it.ID, size, ids[i].position, len(got))
			msgs[i] = nil
		}
	}
}

// redriveMessage is the message put back on the destination.
func redriveMessage(src pulsar.Message, id msgID, it backend.MoveItem, m backend.Markers, names envelope.FieldNames) *pulsar.ProducerMessage {
	props := maps.Clone(src.Properties())
	if props == nil {
		props = map[string]string{}
	}
	for _, k := range routingProps {
		delete(props, k)
	}
	rc, count := names[envelope.FieldRedriveCount][0], 0
	for _, n := range names[envelope.FieldRedriveCount] {
		if v, ok := props[n]; ok {
			rc = n
			count, _ = strconv.Atoi(v) // unreadable counts as 0
			break
		}
	}
	props[rc] = strconv.Itoa(count + 1)
	props[backend.MarkerRunID] = m.RunID
	props[backend.MarkerSeq] = strconv.FormatInt(it.Seq, 10)
	props[backend.MarkerRedrivenFrom] = id.String()
	seq := it.Seq
	return &pulsar.ProducerMessage{
		Payload:     src.Payload(),
		Key:         src.Key(),
		OrderingKey: src.OrderingKey(),
		EventTime:   unixMillis(src.EventTime()),
		Properties:  props,
		SequenceID:  &seq,
	}
}

// redriveProducer is the run's producer on one destination.
type redriveProducer struct {
	onceProducer
	partitioned bool
}

// producer is the run's producer on dest: named name, never batching, so
// that each message's sequence id is its own, and never reconnected by
// the client, so that nothing is sent twice behind the run's back
// (sendonce.go). One whose connection was lost is replaced by a new one
// of the same name.
func (t *Topic) producer(ctx context.Context, dest, name string) (redriveProducer, error) {
	key := [2]string{name, dest}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.producers[key]; ok {
		if !p.isLost() {
			return p, nil
		}
		delete(t.producers, key)
		p.Close()
	}
	p, err := withCtx(ctx, func() (redriveProducer, error) {
		parts, err := t.client.TopicPartitions(dest)
		if err != nil {
			return redriveProducer{}, err
		}
		p, err := t.createOnceProducer(pulsar.ProducerOptions{
			Topic:           dest,
			Name:            name,
			DisableBatching: true,
			SendTimeout:     t.sendTimeout,
		})
		return redriveProducer{p, len(parts) > 1 || len(parts) == 1 && partitionSuffix.MatchString(parts[0]) && !partitionSuffix.MatchString(dest)}, err
	}, func(p redriveProducer) { p.Close() })
	if err != nil {
		return redriveProducer{}, err
	}
	t.producers[key] = p
	return p, nil
}

// Remove acknowledges each item's message on the DLQ subscription, with
// the broker's response, if it is still pending (else Err wraps
// ErrNotFound). A batched message is acknowledged only with every other
// message of its batch in the same call (else Err says so and nothing is
// acknowledged for it). An acknowledgement the broker did not confirm
// returns an error: the outcome is unknown, and a retry finds the message
// either pending still or gone.
func (t *Topic) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	cursors := map[int32]cursor{}
	msgs := make([]pulsar.Message, len(items))
	ids := make([]msgID, len(items))
	for i, it := range items {
		msg, id, err := t.getMessage(ctx, it.ID, cursors)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			results[i].Err = err
			continue
		case err != nil:
			return nil, err
		}
		msgs[i], ids[i] = msg, id
	}
	checkBatches(items, msgs, ids, results)
	// Recorded first, acknowledged after: an acknowledgement a broker
	// crash loses is still known as a removal (removals.go).
	var entries []msgID
	seen := map[msgID]bool{}
	for i := range items {
		if msgs[i] == nil || results[i].Err != nil {
			continue
		}
		entry := msgID{position: ids[i].position, partition: ids[i].partition, batch: -1}
		if !seen[entry] {
			seen[entry] = true
			entries = append(entries, entry)
		}
		results[i].Removed = true
	}
	if err := t.recordRemovals(ctx, entries); err != nil {
		return nil, err
	}
	for _, entry := range entries {
		if err := t.ack(ctx, entry); err != nil {
			return nil, err
		}
	}
	// Entries acknowledged before and brought back by a broker crash are
	// acknowledged again by the run that holds the DLQ.
	for pi, c := range cursors {
		if p, ok := t.partOf(pi); ok && len(c.removed) > 0 {
			if err := t.reackCameBack(ctx, p, c); err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}

// ack acknowledges one entry on the DLQ subscription and waits for the
// broker to confirm it.
func (t *Topic) ack(ctx context.Context, id msgID) error {
	p, ok := t.partOf(id.partition)
	if !ok {
		return fmt.Errorf("%s: no partition %d", t, id.partition)
	}
	c, err := t.acker(ctx, p)
	if err != nil {
		return err
	}
	_, err = withCtx(ctx, func() (struct{}, error) {
		return struct{}{}, c.AckID(pulsar.NewMessageID(id.ledger, id.entry, -1, -1))
	}, nil)
	if err != nil {
		return t.connErr(ctx, "acknowledge "+id.String(), err)
	}
	return nil
}

// acker is a consumer on the DLQ subscription that never asks for
// messages (a zero receive queue gives the broker no permits), used only
// to acknowledge. Shared, so that it can sit beside other readers of the
// subscription.
func (t *Topic) acker(ctx context.Context, p part) (pulsar.Consumer, error) {
	key := p.name.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.ackers[key]; ok {
		return c, nil
	}
	c, err := withCtx(ctx, func() (pulsar.Consumer, error) {
		return t.client.Subscribe(pulsar.ConsumerOptions{
			Topic:                       key,
			SubscriptionName:            t.sub,
			Type:                        pulsar.Shared,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			EnableZeroQueueConsumer:     true,
			AckWithResponse:             true,
		})
	}, pulsar.Consumer.Close)
	if err != nil {
		return nil, t.connErr(ctx, "subscribe "+t.sub+" on "+key, err)
	}
	t.ackers[key] = c
	return c, nil
}

var _ backend.DestinationGuard = (*Topic)(nil)

// GuardDestination refuses the DLQ topic itself, under any spelling
// (NAME, TENANT/NS/NAME, persistent://…) and any of its partitions (or,
// when the DLQ is one partition, the whole topic it belongs to): a message
// sent there is back in the DLQ at once. It refuses every topic that holds
// dlqctl's bookkeeping, this DLQ's or another's: a removal record by its
// name (TOPIC-dlqctl-removed, created yet or not) and any topic the
// dlqctl-bookkeeping property marks, whatever its name; a message sent
// there would count as dlqctl's own. And it refuses a topic in a tenant or
// namespace that does not exist, which no send could reach: better said
// to the planner than found at apply.
func (t *Topic) GuardDestination(ctx context.Context, dest string) error {
	dt, err := parseTopic(dest)
	if err != nil {
		return fmt.Errorf("%q is not a topic a redrive can send to: %v", dest, err)
	}
	whole := wholeTopic(dt)
	if whole == wholeTopic(t.topic) {
		return fmt.Errorf("%s is this DLQ's own topic (%s)", dest, t.topic)
	}
	if whole == t.removedTopic() {
		return fmt.Errorf("%s is this DLQ's record of removed entries (dlqctl's bookkeeping)", dest)
	}
	if strings.HasSuffix(whole.local, removedSuffix) {
		return fmt.Errorf("%s is named as dlqctl's record of the entries removed from a DLQ (%s): dlqctl's bookkeeping", dest, strings.TrimSuffix(whole.String(), removedSuffix))
	}
	if err := t.admin.namespaceOf(ctx, dt); err != nil {
		return err
	}
	return t.admin.bookkeeping(ctx, whole)
}

// wholeTopic is the partitioned topic a partition belongs to, or t itself.
func wholeTopic(t topicName) topicName {
	t.local = partitionSuffix.ReplaceAllString(t.local, "")
	return t
}
