package pulsardlq

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
)

var _ backend.PublishedChecker = (*Topic)(nil)

// clockSlack widens the time a lookup reads from: the broker's publish
// times and dlqctl's clock need not agree to the second.
const clockSlack = time.Minute

// CheckPublished reads each destination from the first message published
// at or after the queries' Since (through the admin API's message id by
// time) and finds the messages that carry run m's id and an item's
// sequence number. A message that is not found is PresenceUnknown, never
// PresenceAbsent: a topic whose subscriptions all acknowledged a message
// may have dropped it, so its absence proves nothing.
func (t *Topic) CheckPublished(ctx context.Context, queries []backend.PublishedQuery, m backend.Markers) ([]backend.Presence, error) {
	out := make([]backend.Presence, len(queries))
	type want struct {
		since time.Time
		idx   []int
	}
	byDest := map[string]*want{}
	var order []string
	for i, q := range queries {
		w := byDest[q.Item.Dest]
		if w == nil {
			w = &want{since: q.Since}
			byDest[q.Item.Dest] = w
			order = append(order, q.Item.Dest)
		}
		if q.Since.Before(w.since) {
			w.since = q.Since
		}
		w.idx = append(w.idx, i)
	}
	for _, dest := range order {
		w := byDest[dest]
		seqs, err := t.runSeqsOn(ctx, dest, m.RunID, w.since.Add(-clockSlack))
		if err != nil {
			return nil, err
		}
		for _, i := range w.idx {
			if seqs[queries[i].Item.Seq] {
				out[i] = backend.PresenceFound
			}
		}
	}
	return out, nil
}

// runSeqsOn is the set of dlqctl_seq values of the messages run runID put
// on dest since the time since.
func (t *Topic) runSeqsOn(ctx context.Context, dest, runID string, since time.Time) (map[int64]bool, error) {
	found := map[int64]bool{}
	dt, err := parseTopic(dest)
	if err != nil {
		return found, nil // nothing could have been sent there
	}
	n, err := t.admin.partitions(ctx, dt)
	if err != nil {
		return nil, t.connErr(ctx, "partitions of "+dt.String(), err)
	}
	topics := []topicName{dt}
	if n > 0 {
		topics = topics[:0]
		for i := range n {
			topics = append(topics, dt.partition(i))
		}
	}
	ms := max(0, since.UnixMilli())
	for _, tp := range topics {
		var from lastMessageID
		err := t.admin.do(ctx, http.MethodGet, tp.adminPath()+"/messageid/"+strconv.FormatInt(ms, 10), nil, &from)
		if errors.Is(err, errAdminNotFound) {
			continue // no such topic: nothing was put there
		}
		if err != nil {
			return nil, t.connErr(ctx, "message id by time on "+tp.String(), err)
		}
		if err := t.readRunSeqs(ctx, tp, position{from.LedgerID, from.EntryID}, runID, found); err != nil {
			return nil, err
		}
	}
	return found, nil
}

func (t *Topic) readRunSeqs(ctx context.Context, tp topicName, start position, runID string, found map[int64]bool) error {
	r, err := withCtx(ctx, func() (pulsar.Reader, error) {
		return t.client.CreateReader(pulsar.ReaderOptions{
			Topic:                   tp.String(),
			StartMessageID:          pulsar.NewMessageID(start.ledger, start.entry, -1, -1),
			StartMessageIDInclusive: true,
			ReceiverQueueSize:       scanQueueSize,
			SubscriptionRolePrefix:  "dlqctl-read",
		})
	}, pulsar.Reader.Close)
	if err != nil {
		return t.connErr(ctx, "open a reader on "+tp.String(), err)
	}
	defer r.Close()
	last, err := lastOf(ctx, r)
	if err != nil {
		return t.connErr(ctx, "last message id of "+tp.String(), err)
	}
	if last.entry < 0 || last.less(start) {
		return nil
	}
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return t.connErr(ctx, "read "+tp.String(), err)
		}
		props := m.Properties()
		if props[backend.MarkerRunID] == runID {
			if seq, err := strconv.ParseInt(props[backend.MarkerSeq], 10, 64); err == nil {
				found[seq] = true
			}
		}
		at := position{m.ID().LedgerID(), m.ID().EntryID()}
		if !at.less(last) && lastInEntry(m.ID()) {
			return nil
		}
	}
}
