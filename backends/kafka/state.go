package kafkadlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// errOpenTxn: a transaction on the state topic stayed open past any time
// the broker should have taken to end it.
var errOpenTxn = errors.New("a transaction on the state topic is still open")

// openTxnLimit is how long a read waits for an open transaction on the
// state topic to end: twice the transaction timeout, and the broker's
// check for timed-out transactions (10 s by default) with room to spare.
func openTxnLimit(txnTTL time.Duration) time.Duration { return 2*txnTTL + 30*time.Second }

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
	// Source is the share-group source record a redrive put back
	// (shareMoveKey), so that another run resolves the record's other
	// dead letters instead of putting it back again (share_move.go).
	Source string `json:"source,omitempty"`
}

// state is what the state topic holds: the entries taken out of the DLQ
// by locator.
type state struct {
	done *doneSet
	// shares is the share-group source records redrives put back
	// (share_move.go); nil when the state topic was not read.
	shares *shareMoves
}

// stateCache is the state topic as a Topic last read it: up to which
// offset of each partition, what that held, and how its records were
// judged (provenance.go).
type stateCache struct {
	upTo map[int32]int64
	st   state
	prov provenance
}

// stateChange is one state record read.
type stateChange struct {
	key string
	rec stateRecord
}

// parseStateRecord reads r as an entry's state record: a locator key and
// a state record of a known status.
func parseStateRecord(r *kgo.Record) (stateRecord, bool) {
	var sr stateRecord
	if r.Value == nil || json.Unmarshal(r.Value, &sr) != nil || (sr.Status != StatusRedriven && sr.Status != StatusResolved) {
		return stateRecord{}, false
	}
	if _, _, ok := ParseKafkaID(string(r.Key)); !ok {
		return stateRecord{}, false
	}
	return sr, true
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
	spans, ok, err := t.stateSpans(ctx, stable)
	if err != nil || !ok {
		return state{done: newDoneSet(t.topicID)}, err
	}
	// One read at a time: a second would apply the same records twice.
	t.stateMu.Lock()
	defer t.stateMu.Unlock()
	cached := t.state
	ranges, fresh, changed := cached.toRead(spans)
	if !changed {
		return cached.st, nil
	}
	// A fresh read fills a new set, which only a read that succeeds puts
	// in the cache; what a later read finds is collected first and applied
	// only once the read succeeded, so a failed read leaves the cache as
	// it was. (Collecting a whole state topic first held every record
	// twice.)
	var changes []stateChange
	prov := newProvenance()
	st := state{done: newDoneSet(t.topicID), shares: newShareMoves()}
	if !fresh {
		prov, st = cached.prov, cached.st
	}
	err = t.readRange(ctx, t.src.stateTopic, ranges, func(r *kgo.Record) error {
		if !prov.written(r) {
			prov.ignore(r, notWritten(r))
			return nil
		}
		if isMetaKey(string(r.Key)) {
			// Lease, claim and format records: readMeta's.
			return nil
		}
		sr, ok := parseStateRecord(r)
		if !ok {
			// A tombstone too: dlqctl never writes one, and an entry it
			// took out of the DLQ never comes back.
			prov.ignore(r, "not a dlqctl state record")
			return nil
		}
		if sr.Status == StatusRedriven && !r.Attrs.IsTransactional() {
			// A redrive's state record commits with the records it put
			// back, in their transaction, in every dlqctl: one written
			// otherwise is not its own, in a state topic of any age.
			prov.ignore(r, "a redrive's state record written outside a transaction")
			return nil
		}
		if fresh {
			st.done.set(string(r.Key), sr) // no one else sees it yet
			st.shares.note(string(r.Key), sr)
		} else {
			changes = append(changes, stateChange{key: string(r.Key), rec: sr})
		}
		return nil
	})
	if err != nil {
		return state{done: newDoneSet(t.topicID)}, err
	}
	st.done.mu.Lock()
	for _, c := range changes {
		st.done.set(c.key, c.rec)
	}
	st.done.mu.Unlock()
	for _, c := range changes {
		st.shares.note(c.key, c.rec)
	}
	upTo := make(map[int32]int64, len(spans))
	for _, s := range spans {
		upTo[s.partition] = s.end
	}
	t.state = &stateCache{upTo: upTo, st: st, prov: prov}
	return st, nil
}

// ignoredWarning says how many records of the state topic, as last read,
// did not count because dlqctl did not write them (provenance.go), ""
// when none.
func (t *Topic) ignoredWarning() string {
	t.stateMu.Lock()
	defer t.stateMu.Unlock()
	if t.state == nil || t.state.prov.ignored == 0 {
		return ""
	}
	p := t.state.prov
	return fmt.Sprintf("%d records in the state topic %s were not written by dlqctl and change nothing (e.g. %s): someone else produces to it; grant Write on it only to dlqctl",
		p.ignored, t.src.stateTopic, p.example)
}

// toRead says what of the state topic a read must cover given what c
// holds (c may be nil): per partition, from where c stopped to the last
// stable offset, or all of it (fresh) when c is nil or a partition is new
// or shorter than it was (the topic was deleted and made again). changed
// is false when there is nothing new.
func (c *stateCache) toRead(spans []span) (ranges map[int32][2]int64, fresh, changed bool) {
	ranges = make(map[int32][2]int64, len(spans))
	fresh = c == nil
	for _, s := range spans {
		from := s.start
		if !fresh {
			upTo, seen := c.upTo[s.partition]
			if !seen || upTo > s.end {
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
		return ranges, true, true
	}
	for _, r := range ranges {
		if r[0] < r[1] {
			return ranges, false, true
		}
	}
	return ranges, false, false
}

// stateSpans returns the state topic's partitions (ok false when it does
// not exist). With stable, it first waits until no transaction is open on
// them, and a lease holder settles one that hangs (hanging.go).
func (t *Topic) stateSpans(ctx context.Context, stable bool) ([]span, bool, error) {
	// The markers of a commit that just returned land within milliseconds:
	// look again soon, then less often (a crashed run's transaction can
	// take the transaction timeout).
	wait := stableWaitFirst
	purged, noted := false, false
	// The run that takes the lease next aborts an open transaction at
	// once, else the broker does after the transaction timeout and its
	// next check for timed-out ones (10 s by default). A transaction open
	// long past that is one the broker is not ending (a coordinator that
	// is not up, a producer with a far longer timeout, or one no
	// coordinator holds): say so rather than wait on it for ever.
	limit := time.Now().Add(openTxnLimit(t.txnTTL))
	nextHangCheck := time.Now().Add(hangCheckAfter)
	var suspects []openTxn // seen hanging at the last check
	var unsettled error    // why the last check settled nothing it found
	for {
		spans, ok, err := t.spans(ctx, t.src.stateTopic)
		if err != nil {
			return nil, false, err
		}
		if !ok && !purged {
			// Another dlqctl may have made the state topic since this
			// client last looked: forget what it knows and ask again.
			t.cl.PurgeTopicsFromClient(t.src.stateTopic)
			purged = true
			continue
		}
		if !ok || !stable || !anyOpen(spans) {
			return spans, ok, nil
		}
		if !noted {
			noted = true
			defer t.slow(fmt.Sprintf("waiting for a transaction open on the state topic %s to end (a run killed or cut off inside a chunk: the run that takes the lease next aborts it at once, else the broker after the transaction timeout, %s, and its next check for timed-out transactions)", t.src.stateTopic, t.txnTTL))()
		}
		if time.Now().After(limit) {
			why := t.describeOpenTxns(ctx)
			if unsettled != nil {
				why += fmt.Sprintf("; settling it failed: %v", unsettled)
			}
			return nil, false, t.connErr(ctx, "wait for an open transaction on "+t.src.stateTopic,
				fmt.Errorf("%w: it stayed open for %s, well past the transaction timeout (%s): the broker is not ending it%s", errOpenTxn, openTxnLimit(t.txnTTL), t.txnTTL, why))
		}
		if t.holdsLease() && time.Now().After(nextHangCheck) {
			// A hanging transaction ends only by hand: the lease holder
			// settles it.
			nextHangCheck = time.Now().Add(hangCheckAfter)
			n, next, err := t.settleHanging(ctx, suspects)
			suspects = next
			if err != nil {
				// Not settled now (a coordinator still loading, an origin
				// not settled yet, no permission to write the marker): the
				// wait goes on, and its end says why.
				unsettled = err
			} else if n > 0 {
				unsettled = nil
				continue
			}
		}
		select {
		case <-ctx.Done():
			what := "wait for an open transaction on " + t.src.stateTopic
			if unsettled != nil {
				// Why the wait went on so long.
				return nil, false, backend.Scrub(fmt.Errorf("%s: %s: %w; settling it failed: %v", t, what, ctx.Err(), unsettled), t.password)
			}
			return nil, false, t.connErr(ctx, what, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, stableWaitInterval)
	}
}

// anyOpen says whether a transaction is open on any of the partitions:
// the last stable offset is short of the high watermark.
func anyOpen(spans []span) bool {
	for _, s := range spans {
		if s.end < s.hwm {
			return true
		}
	}
	return false
}

// ensureStateTopic makes the state topic on first write (or sets up one
// that exists), and records it as the DLT's (claim.go).
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

// stateTopicConfig is what a state topic must be set to. Nothing in it is
// ever deleted (retention.ms=-1, retention.bytes=-1), and it is not
// compacted: a record that anyone writes with an entry's key would make
// compaction delete the entry's state record, and the entry would be
// moved again. Its records carry the broker's clock, which times the
// lease.
var stateTopicConfig = [][2]string{
	{"cleanup.policy", "delete"},
	{"retention.ms", "-1"},
	{"retention.bytes", "-1"},
	{"message.timestamp.type", logAppendTime},
}

// createStateTopic makes topic a state topic (one partition, kept for
// ever, the broker's timestamps, its format record first) unless it
// exists; one that exists (made by an older dlqctl, by an operator, or by
// a produce on a broker that creates topics with its own defaults) is set
// so.
func (t *Topic) createStateTopic(ctx context.Context, topic string) error {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	configs := map[string]*string{}
	for _, kv := range stateTopicConfig {
		configs[kv[0]] = &kv[1]
	}
	resp, err := t.adm.CreateTopic(rctx, stateTopicPartNum, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		if err := t.setStateConfig(rctx, topic); err != nil {
			return err
		}
	case err != nil:
		return t.connErr(ctx, "create the state topic "+topic, err)
	}
	// The client caches metadata: a read before the creation would still
	// find the topic missing.
	t.cl.PurgeTopicsFromClient(topic)
	t.mu.Lock()
	if t.made == nil {
		t.made = map[string]bool{}
	}
	t.made[topic] = true
	t.mu.Unlock()
	return t.ensureFormat(ctx, topic)
}

// isMade says whether createStateTopic made or set up topic.
func (t *Topic) isMade(topic string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.made[topic]
}
