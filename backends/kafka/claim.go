package kafkadlq

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// One DLT has one state topic: two runs through URLs that differ in
// state_topic= would each hold "the" lease and each move every entry, and
// a plan with another state topic would bring back every entry already
// redriven. So the state topic a DLT uses is recorded where every run
// looks, whatever its URL says: in the DLT's default state topic
// (<DLT>.dlqctl-state), as a claim record keyed dlqctl-claim/<state
// topic>. The first claim there wins; a default state topic that holds
// state but no claim (written before claims existed) claims itself. A run
// whose state topic differs from the claim is refused at Open.

// claimRecord binds a DLT to the state topic that records what was taken
// out of it.
type claimRecord struct {
	DLT        string `json:"dlt"`
	StateTopic string `json:"state_topic"`

	offset int64
}

// defaultState is the DLT's default state topic: where claims live.
func (t *Topic) defaultState() string { return t.src.topic + defaultStateSuffix }

// firstClaim is the state topic recorded for the DLT, "" when none is.
// It reads the default state topic only up to its first claim or first
// state record: a claim is written before the first state record.
func (t *Topic) firstClaim(ctx context.Context) (string, error) {
	topic := t.defaultState()
	spans, ok, err := t.spans(ctx, topic)
	if err != nil || !ok {
		return "", err
	}
	ranges := map[int32][2]int64{}
	for _, s := range spans {
		if s.partition == 0 && s.start < s.hwm {
			ranges[0] = [2]int64{s.start, s.hwm}
		}
	}
	found := ""
	prov := newProvenance()
	err = t.readRangeIso(ctx, topic, ranges, kgo.ReadUncommitted(), func(r *kgo.Record) error {
		k := string(r.Key)
		if !prov.written(r) {
			return nil
		}
		switch {
		case strings.HasPrefix(k, claimKeyPrefix):
			var c claimRecord
			if json.Unmarshal(r.Value, &c) != nil || c.StateTopic == "" {
				return nil
			}
			found = c.StateTopic
		case k == leaseKey, k == formatKey:
			return nil
		default:
			if _, ok := parseStateRecord(r); !ok {
				return nil
			}
			// State from before claims: the default topic is the one.
			found = topic
		}
		return backend.ErrStop
	})
	return found, err
}

// checkClaim refuses a URL whose state topic is not the one recorded for
// the DLT (a *backend.ConfigError, exit 2).
func (t *Topic) checkClaim(ctx context.Context) error {
	got, err := t.firstClaim(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.claimed = got
	t.mu.Unlock()
	if got != "" && got != t.src.stateTopic {
		fix := "state_topic=" + got
		if got == t.defaultState() {
			fix = "no state_topic= (the default)"
		}
		return backend.Configf("%s: the DLT %q records its state in %q, not in %q: one DLT has one state topic (what another state topic holds would be ignored and entries moved twice); use %s",
			t, t.src.topic, got, t.src.stateTopic, fix)
	}
	return nil
}

// claim records this URL's state topic for the DLT if none is yet, and
// refuses if another claim came first.
func (t *Topic) claim(ctx context.Context) error {
	if t.recordedStateTopic() != "" {
		return nil
	}
	if t.src.stateTopic != t.defaultState() {
		if err := t.createStateTopic(ctx, t.defaultState()); err != nil {
			return err
		}
	}
	v, _ := json.Marshal(claimRecord{DLT: t.src.topic, StateTopic: t.src.stateTopic})
	rctx, cancel := context.WithTimeout(ctx, t.metaTimeout())
	defer cancel()
	if err := t.writeMeta(rctx, &kgo.Record{Topic: t.defaultState(), Key: []byte(claimKeyPrefix + t.src.stateTopic), Value: v}); err != nil {
		return t.connErr(ctx, fmt.Sprintf("record %s as the state topic of %s", t.src.stateTopic, t.src.topic), err)
	}
	return t.checkClaim(ctx)
}
