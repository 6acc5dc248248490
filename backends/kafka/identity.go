package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// A state record hides the DLT record at its locator only if it is about
// that record: the same topic (Kafka topic ID: a DLT deleted and made
// again has another ID and reuses offsets from 0), the same record
// timestamp, and — for a state record written before these were recorded
// — the same fingerprint. One that disagrees hides nothing, and is counted
// so that stats can say so.

// hides says whether state record rec is about record r, and counts it
// when it is not.
func (t *Topic) hides(rec stateRecord, r *kgo.Record) bool {
	why := ""
	switch {
	case rec.TopicID != "" && t.topicID != "" && rec.TopicID != t.topicID:
		why = fmt.Sprintf("it was written for topic ID %s, and %q is now topic ID %s (deleted and made again?)", rec.TopicID, t.src.topic, t.topicID)
	case rec.RecordTS != 0 && rec.RecordTS != r.Timestamp.UnixMilli():
		why = fmt.Sprintf("it was written for a record of timestamp %d ms, the record there now has %d ms", rec.RecordTS, r.Timestamp.UnixMilli())
	case rec.RecordTS == 0 && rec.Fingerprint != "":
		if fp := t.decode(r).Fingerprint; fp != rec.Fingerprint {
			why = fmt.Sprintf("it was written for fingerprint %s, the record there now has %s", rec.Fingerprint, fp)
		}
	}
	if why == "" {
		return true
	}
	t.mu.Lock()
	if t.mismatch == nil {
		t.mismatch = map[string]string{}
	}
	if len(t.mismatch) < maxMismatchKept {
		t.mismatch[fmt.Sprintf("%d:%d", r.Partition, r.Offset)] = why
	}
	t.mismatches++
	t.mu.Unlock()
	return false
}

// maxMismatchKept bounds the disagreeing state records a Topic keeps to
// name in its warning.
const maxMismatchKept = 3

// goneErr is nil when entry id, whose record is r (nil when none is
// there), is in the DLQ; else the ErrNotFound it is, naming the run that
// redrove or resolved it where the state topic took it out.
func (t *Topic) goneErr(st state, id string, r *kgo.Record) error {
	if r == nil {
		return fmt.Errorf("entry %s: %w in %s", id, backend.ErrNotFound, t)
	}
	rec, ok := st.done.get(id)
	if !ok || !t.hides(rec, r) {
		return nil
	}
	return fmt.Errorf("entry %s: %w in %s: %s", id, backend.ErrNotFound, t, rec.describe(t.src.stateTopic))
}

// describe says what the state record records, for an error.
func (r stateRecord) describe(stateTopic string) string {
	who := "a run"
	if r.RunID != "" {
		who = "run " + r.RunID
	}
	at := r.At.UTC().Format(time.RFC3339)
	if r.Status == StatusResolved {
		return fmt.Sprintf("%s resolved it at %s (recorded in %s)", who, at, stateTopic)
	}
	return fmt.Sprintf("%s redrove it to %s at %s, as %s (recorded in %s)", who, r.Dest, at, r.DestID, stateTopic)
}

// mismatchWarning says how many state records disagreed with the record
// at their locator (those entries were shown), "" when none did.
func (t *Topic) mismatchWarning() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mismatches == 0 {
		return ""
	}
	for id, why := range t.mismatch {
		return fmt.Sprintf("%d state records in %s are not about the record now at their offset, so those entries are shown as in the DLQ; e.g. entry %s: %s",
			t.mismatches, t.src.stateTopic, id, why)
	}
	return ""
}

// topicMeta is the number of partitions and the topic ID ("" when the
// broker has none) of topic; a topic that does not exist is an error
// naming it.
func (t *Topic) topicMeta(ctx context.Context, topic string) (int, string, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	md, err := t.adm.ListTopics(rctx, topic)
	if err != nil {
		return 0, "", t.connErr(ctx, "metadata", err)
	}
	d, ok := md[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return 0, "", fmt.Errorf("%s: topic %q %w", t, topic, errNoTopic)
	}
	if d.Err != nil {
		return 0, "", t.connErr(ctx, "metadata of "+topic, d.Err)
	}
	id := ""
	if d.ID != [16]byte{} {
		id = d.ID.String()
	}
	return len(d.Partitions), id, nil
}
