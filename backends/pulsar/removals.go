package pulsardlq

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/apache/pulsar-client-go/pulsar"
)

// The removal record. A broker confirms an acknowledgement once it has
// moved the subscription's cursor in memory, and writes the cursor to its
// store later (at most once a second, and on a flush every minute). A
// broker that crashes in between forgets the acknowledgements: the entries
// come back to the DLQ subscription although a redrive put them back on
// their origin and journaled them as removed, and a new plan would move
// them a second time.
//
// So dlqctl keeps its own record of what it acknowledged, on a topic
// beside the DLQ (TOPIC-dlqctl-removed): before it acknowledges entries it
// sends their locators there and waits until the broker has stored them,
// which for a message, unlike for a cursor, means written to the
// bookies' journals. Every read treats an entry the record holds as
// acknowledged, whatever the cursor says; such entries are counted as
// "came back", said in stats and plan, and acknowledged again by the next
// removal (a redrive or resolve apply, which holds the lease).
//
// The record has to outlive the crash it guards against, under the
// broker's own rules:
//
//   - Retention. With the default retention a topic keeps only what some
//     subscription has not acknowledged, and a topic with no subscription
//     keeps only its open ledger: the restart after a crash opens a new
//     ledger and the next retention check deletes the old one. The record
//     topic has a durable subscription of its own, dlqctl-retain, that
//     never acknowledges anything, so every ledger of the record stays.
//     That also keeps the broker's inactive-topic deletion (on by default,
//     for topics without subscriptions) away from it.
//   - Automatic topic creation. A namespace may create topics partitioned
//     on first use; the record topic is created explicitly, not
//     partitioned, before its first message, and marked with the topic
//     property dlqctl-bookkeeping.
//
// And the record must count only when dlqctl wrote it: anyone who may
// produce to the topic could otherwise hide a DLQ entry by writing its
// locator there. Each removal is one record message holding its entries,
// the hash of the previous record of its chain and its place in the chain;
// the chain's last hash and length (the anchor) are kept in the property
// dlqctl-removals of the DLQ subscription itself, which only a principal
// allowed to consume that subscription (and so to acknowledge its entries
// anyway) may change, and which the broker writes to its metadata store
// before it answers. Reads follow the chain back from the anchor; a
// message that is not on it counts for nothing. An anchor whose chain
// cannot be read whole (the topic deleted, trimmed, or made partitioned)
// is an error, never an empty record.

const (
	// removedSuffix names the record topic: TOPIC-dlqctl-removed.
	removedSuffix = "-dlqctl-removed"
	// retainSub is the record topic's subscription that keeps every ledger.
	retainSub = "dlqctl-retain"
	// anchorProperty is the DLQ subscription's property holding the anchor.
	anchorProperty = "dlqctl-removals"
	// bookkeepingProperty marks a topic that holds dlqctl's bookkeeping.
	bookkeepingProperty = "dlqctl-bookkeeping"
	// recordSchema names a record message's form.
	recordSchema = "dlqctl.removals/v1"
	// brokerPropertyPrefix starts the broker's own subscription properties,
	// which a client may not set.
	brokerPropertyPrefix = "#pulsar.internal."
)

// removedTopic is where the removal record lives.
func (t *Topic) removedTopic() topicName {
	r := wholeTopic(t.topic)
	r.local += removedSuffix
	return r
}

// anchorTopic is the topic whose DLQ subscription holds the anchor: the
// DLQ topic, or its first partition (a partitioned topic's subscription
// properties live on each partition).
func (t *Topic) anchorTopic() topicName { return t.firstTopic() }

// anchor is the end of the chain of records the DLQ subscription vouches
// for; the zero anchor vouches for none.
type anchor struct {
	Chain string `json:"chain"`
	N     int64  `json:"n"`
	Tip   string `json:"tip"`
}

// removalRecord is one record message: the entries one removal took.
type removalRecord struct {
	Schema       string   `json:"schema"`
	Chain        string   `json:"chain"`
	N            int64    `json:"n"`
	Prev         string   `json:"prev"`
	Subscription string   `json:"subscription"`
	Entries      []string `json:"entries"`
}

// removals is the record as read, by partition index (-1: not
// partitioned), with what this process added since.
type removals struct {
	// load serializes reading and extending the record; loaded says the
	// record was read (a failed read is tried again by the next caller,
	// as a broker may be back).
	load   sync.Mutex
	loaded bool
	// anchor is the chain as read or last extended by this process.
	anchor anchor
	mu     sync.Mutex
	at     map[int32]map[position]bool
	// ready: this process made sure the record topic and its retaining
	// subscription exist.
	ready bool
	// producer writes the record; made on the first removal.
	producer pulsar.Producer
}

// loadRemovals reads the record once per process.
func (t *Topic) loadRemovals(ctx context.Context) error {
	t.removed.load.Lock()
	defer t.removed.load.Unlock()
	if t.removed.loaded {
		return nil
	}
	_, a, err := t.readAnchor(ctx)
	if err != nil {
		return err
	}
	return t.readChain(ctx, a)
}

// readAnchor reads the DLQ subscription's properties and the anchor among
// them.
func (t *Topic) readAnchor(ctx context.Context) (map[string]string, anchor, error) {
	at := t.anchorTopic()
	props := map[string]string{}
	err := t.admin.do(ctx, http.MethodGet, at.adminPath()+"/subscription/"+url.PathEscape(t.sub)+"/properties", nil, &props)
	if errors.Is(err, errAdminNotFound) {
		return map[string]string{}, anchor{}, nil // no subscription, so nothing it vouches for
	}
	if err != nil {
		return nil, anchor{}, t.connErr(ctx, "properties of the subscription "+t.sub+" on "+at.String(), err)
	}
	var a anchor
	if raw, ok := props[anchorProperty]; ok {
		if err := json.Unmarshal([]byte(raw), &a); err != nil || a.N < 0 || (a.N > 0 && (a.Chain == "" || a.Tip == "")) {
			return nil, anchor{}, fmt.Errorf("%s: the property %s of the subscription %s on %s is not dlqctl's anchor of its removal record: %.120q",
				t, anchorProperty, t.sub, at, raw)
		}
	}
	return props, a, nil
}

// readChain reads the record chain that a vouches for and replaces what
// this process knows with it.
func (t *Topic) readChain(ctx context.Context, a anchor) error {
	t.removed.loaded = false
	t.removed.mu.Lock()
	t.removed.at = map[int32]map[position]bool{}
	t.removed.mu.Unlock()
	if a.N > 0 {
		chain, err := t.readRecords(ctx, a)
		if err != nil {
			return err
		}
		h := a.Tip
		for k := a.N; k >= 1; k-- {
			r, ok := chain[h]
			if !ok || r.N != k {
				return t.recordLost(a, fmt.Sprintf("its record %d (%.12s…) is not in %s", k, h, t.removedTopic()))
			}
			for _, e := range r.Entries {
				if id, ok := parseMsgID(e); ok {
					t.noteRemoved(id)
				}
			}
			h = r.Prev
		}
		if h != "" {
			return t.recordLost(a, "its first record names an earlier one")
		}
	}
	t.removed.anchor = a
	t.removed.loaded = true
	return nil
}

// readRecords reads the record topic whole and returns the records of a's
// chain by hash; messages of other chains and anything else are left out.
func (t *Topic) readRecords(ctx context.Context, a anchor) (map[string]removalRecord, error) {
	rt := t.removedTopic()
	n, err := t.admin.partitions(ctx, rt)
	if err != nil {
		return nil, t.connErr(ctx, "partitions of "+rt.String(), err)
	}
	if n > 0 {
		return nil, t.recordLost(a, fmt.Sprintf("%s is a partitioned topic, not dlqctl's", rt))
	}
	last, err := t.admin.lastMessageID(ctx, rt)
	if errors.Is(err, errAdminNotFound) {
		return nil, t.recordLost(a, fmt.Sprintf("%s does not exist", rt))
	}
	if err != nil {
		return nil, t.connErr(ctx, "last message id of "+rt.String(), err)
	}
	if last.EntryID < 0 {
		return nil, t.recordLost(a, fmt.Sprintf("%s is empty", rt))
	}
	end := position{last.LedgerID, last.EntryID}
	r, err := withCtx(ctx, func() (pulsar.Reader, error) {
		return t.client.CreateReader(pulsar.ReaderOptions{
			Topic:                  rt.String(),
			StartMessageID:         pulsar.EarliestMessageID(),
			ReceiverQueueSize:      scanQueueSize,
			SubscriptionRolePrefix: "dlqctl-read",
		})
	}, pulsar.Reader.Close)
	if err != nil {
		return nil, t.connErr(ctx, "open a reader on "+rt.String(), err)
	}
	defer r.Close()
	chain := map[string]removalRecord{}
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return nil, t.connErr(ctx, "read "+rt.String(), err)
		}
		var rec removalRecord
		if json.Unmarshal(m.Payload(), &rec) == nil && rec.Schema == recordSchema && rec.Chain == a.Chain && rec.Subscription == t.sub {
			chain[recordHash(m.Payload())] = rec
		}
		at := position{m.ID().LedgerID(), m.ID().EntryID()}
		if !at.less(end) && lastInEntry(m.ID()) {
			return chain, nil
		}
	}
}

func recordHash(payload []byte) string {
	h := sha256.Sum256(payload)
	return hex.EncodeToString(h[:])
}

// recordLost is the error for a record that the anchor says exists and
// that cannot be read whole.
func (t *Topic) recordLost(a anchor, why string) error {
	return fmt.Errorf("%s: dlqctl's record of the entries it removed is incomplete: the subscription %s vouches for %d records, and %s. "+
		"Entries that dlqctl removed and a broker restart brought back could not be told from pending ones, so nothing is read. "+
		"If the record was deleted on purpose, clear the subscription's property %s (pulsar-admin topics update-subscription-properties --subscription %s --clear %s)",
		t, t.sub, a.N, why, anchorProperty, t.sub, t.anchorTopic())
}

func (t *Topic) noteRemoved(id msgID) {
	t.removed.mu.Lock()
	defer t.removed.mu.Unlock()
	m := t.removed.at[id.partition]
	if m == nil {
		m = map[position]bool{}
		t.removed.at[id.partition] = m
	}
	m[id.position] = true
}

// backAgain lists the entries of partition index p that the record holds
// and the cursor c shows pending: acknowledgements a broker lost.
func (t *Topic) backAgain(p int32, c cursor) []position {
	t.removed.mu.Lock()
	defer t.removed.mu.Unlock()
	var out []position
	for pos := range t.removed.at[p] {
		if c.pending(pos) {
			out = append(out, pos)
		}
	}
	return out
}

// withRemovals is c with the record's entries of partition p counted as
// acknowledged.
func (t *Topic) withRemovals(p int32, c cursor) cursor {
	back := t.backAgain(p, c)
	if len(back) == 0 {
		return c
	}
	c.removed = make(map[position]bool, len(back))
	for _, pos := range back {
		c.removed[pos] = true
	}
	return c
}

// recordRemovals adds ids (entry locators) to the record: one record
// message, stored by the broker, then the anchor moved to it. Only then
// may the entries be acknowledged.
func (t *Topic) recordRemovals(ctx context.Context, ids []msgID) error {
	if len(ids) == 0 {
		return nil
	}
	if err := t.loadRemovals(ctx); err != nil {
		return err
	}
	if err := t.prepareRecord(ctx); err != nil {
		return err
	}
	t.removed.load.Lock()
	defer t.removed.load.Unlock()
	props, a, err := t.readAnchor(ctx)
	if err != nil {
		return err
	}
	if a != t.removed.anchor {
		// Another process extended the record since this one read it
		// (the run that held the DLQ before this one).
		if err := t.readChain(ctx, a); err != nil {
			return err
		}
	}
	next := anchor{Chain: a.Chain, N: a.N + 1}
	if next.Chain == "" {
		if next.Chain, err = newChainID(); err != nil {
			return err
		}
	}
	rec := removalRecord{Schema: recordSchema, Chain: next.Chain, N: next.N, Prev: a.Tip, Subscription: t.sub}
	for _, id := range ids {
		rec.Entries = append(rec.Entries, id.String())
	}
	payload, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	next.Tip = recordHash(payload)
	p, err := t.removalProducer(ctx)
	if err != nil {
		return err
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload}); err != nil {
		return t.connErr(ctx, "record the removal in "+t.removedTopic().String(), err)
	}
	raw, _ := json.Marshal(next)
	props = maps.Clone(props)
	maps.DeleteFunc(props, func(k, _ string) bool { return strings.HasPrefix(k, brokerPropertyPrefix) })
	props[anchorProperty] = string(raw)
	at := t.anchorTopic()
	if err := t.admin.do(ctx, http.MethodPut, at.adminPath()+"/subscription/"+url.PathEscape(t.sub)+"/properties", props, nil); err != nil {
		return t.connErr(ctx, "anchor the removal record on the subscription "+t.sub, err)
	}
	t.removed.anchor = next
	for _, id := range ids {
		t.noteRemoved(id)
	}
	return nil
}

func newChainID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a new removal record: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// prepareRecord makes sure, once per process, that the record topic
// exists, not partitioned and marked as bookkeeping, with the subscription
// that keeps all of it; the first message goes there only afterwards.
func (t *Topic) prepareRecord(ctx context.Context) error {
	t.removed.mu.Lock()
	ready := t.removed.ready
	t.removed.mu.Unlock()
	if ready {
		return nil
	}
	rt := t.removedTopic()
	n, exists, err := t.admin.topicExists(ctx, rt)
	if err != nil {
		return t.connErr(ctx, "partitions of "+rt.String(), err)
	}
	if n > 0 {
		return fmt.Errorf("%s: %s, where dlqctl keeps its record of removed entries, is a partitioned topic "+
			"(a namespace that creates topics partitioned made it so on first use, before dlqctl created it itself): "+
			"no record of dlqctl's is in it; delete it (pulsar-admin topics delete-partitioned-topic %s) and apply again", t, rt, rt)
	}
	if !exists {
		mark := map[string]string{bookkeepingProperty: "removal record of " + t.topic.String()}
		err = t.admin.do(ctx, http.MethodPut, rt.adminPath(), mark, nil)
		var ae *adminError
		switch {
		case errors.As(err, &ae) && ae.status == http.StatusConflict:
		case errors.As(err, &ae) && (ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden):
			return fmt.Errorf("%s: dlqctl keeps its record of removed entries in %s, which it creates (not partitioned) before the first removal, "+
				"and the broker refused: %v. Have an administrator create it once: pulsar-admin topics create %s", t, rt, err, rt)
		case err != nil:
			return t.connErr(ctx, "create "+rt.String(), err)
		}
	}
	if err := t.admin.createSubscription(ctx, rt, retainSub); err != nil {
		return t.connErr(ctx, "create the subscription "+retainSub+" on "+rt.String(), err)
	}
	t.removed.mu.Lock()
	t.removed.ready = true
	t.removed.mu.Unlock()
	return nil
}

func (t *Topic) removalProducer(ctx context.Context) (pulsar.Producer, error) {
	t.removed.mu.Lock()
	defer t.removed.mu.Unlock()
	if t.removed.producer != nil {
		return t.removed.producer, nil
	}
	rt := t.removedTopic()
	p, err := withCtx(ctx, func() (pulsar.Producer, error) {
		return t.client.CreateProducer(pulsar.ProducerOptions{Topic: rt.String(), SendTimeout: t.sendTimeout, DisableBatching: true})
	}, pulsar.Producer.Close)
	if err != nil {
		return nil, t.connErr(ctx, "create a producer on "+rt.String(), err)
	}
	t.removed.producer = p
	return p, nil
}

// reackCameBack acknowledges again, on partition p, the entries the record
// holds that a broker crash brought back, so that the subscription's own
// backlog (which applications may watch) is true again.
func (t *Topic) reackCameBack(ctx context.Context, p part, c cursor) error {
	for pos := range c.removed {
		if err := t.ack(ctx, msgID{position: pos, partition: p.index, batch: -1}); err != nil {
			return err
		}
	}
	return nil
}

// CameBack counts the entries dlqctl acknowledged that are pending on the
// DLQ subscription again (a broker crash lost the acknowledgements).
func (t *Topic) CameBack(ctx context.Context) (int, error) {
	parts, err := t.parts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range parts {
		c, err := t.cursor(ctx, p)
		if err != nil {
			return 0, err
		}
		n += len(c.removed)
	}
	return n, nil
}

func cameBackNote(n int) string {
	return fmt.Sprintf("%d entries that dlqctl redrove or resolved came back to the DLQ subscription (a broker restart lost their acknowledgements): they are not counted, listed or planned, and the next apply that removes entries acknowledges them again", n)
}
