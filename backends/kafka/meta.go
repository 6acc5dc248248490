package kafkadlq

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The state topic holds, besides one record per entry taken out of the
// DLQ (written in the redrive's transaction), the lease records
// (leaseKey), the claims that bind the DLT to its state topic
// (claimKeyPrefix, claim.go) and the format record (provenance.go). Each
// is written in a transaction of its own that commits at once; they are
// read read_uncommitted, so that a transaction a crashed run left open in
// a chunk never hides who holds the lease.

// claimKeyPrefix starts the key of a claim record.
const claimKeyPrefix = "dlqctl-claim/"

// logAppendTime makes the broker stamp each record with its own clock.
const logAppendTime = "LogAppendTime"

func isMetaKey(k string) bool {
	return k == leaseKey || k == formatKey || strings.HasPrefix(k, claimKeyPrefix)
}

// meta is the lease and claim records of a state topic that dlqctl wrote,
// in log order.
type meta struct {
	leases []leaseRecord
	claims []claimRecord
	// prov judged the records read; prov.cutoff is the offset of the
	// format record, -1 when there is none.
	prov provenance
}

// metaCache is meta as last read, with the offset to read on from.
type metaCache struct {
	upTo int64
	m    meta
}

// readMeta reads the lease and claim records of topic (partition 0, where
// dlqctl writes) up to its high watermark, reading only what is new since
// the last call.
func (t *Topic) readMeta(ctx context.Context, topic string) (meta, error) {
	spans, ok, err := t.spans(ctx, topic)
	if err != nil || !ok {
		return meta{prov: newProvenance()}, err
	}
	var s *span
	for i := range spans {
		if spans[i].partition == 0 {
			s = &spans[i]
		}
	}
	if s == nil {
		return meta{prov: newProvenance()}, nil
	}
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	c := t.metas[topic]
	if c == nil || c.upTo > s.hwm || c.upTo < s.start {
		// First read, or the topic was made again.
		c = &metaCache{upTo: s.start, m: meta{prov: newProvenance()}}
	}
	if c.upTo >= s.hwm {
		return c.m, nil
	}
	m := meta{leases: append([]leaseRecord(nil), c.m.leases...), claims: append([]claimRecord(nil), c.m.claims...), prov: c.m.prov}
	err = t.readRangeIso(ctx, topic, map[int32][2]int64{0: {c.upTo, s.hwm}}, kgo.ReadUncommitted(), func(r *kgo.Record) error {
		k := string(r.Key)
		if !isMetaKey(k) {
			return nil // a state record: loadState's
		}
		if !m.prov.written(r) {
			m.prov.ignore(r, notWritten(r))
			return nil
		}
		switch {
		case k == leaseKey:
			var l leaseRecord
			if json.Unmarshal(r.Value, &l) != nil || l.RunID == "" {
				m.prov.ignore(r, "not a lease record")
				return nil
			}
			l.offset, l.ts = r.Offset, r.Timestamp
			m.leases = append(m.leases, l)
		case strings.HasPrefix(k, claimKeyPrefix):
			var cl claimRecord
			if json.Unmarshal(r.Value, &cl) != nil || cl.StateTopic == "" {
				m.prov.ignore(r, "not a claim record")
				return nil
			}
			cl.offset = r.Offset
			m.claims = append(m.claims, cl)
		}
		return nil
	})
	if err != nil {
		return meta{}, err
	}
	if t.metas == nil {
		t.metas = map[string]*metaCache{}
	}
	t.metas[topic] = &metaCache{upTo: s.hwm, m: m}
	return m, nil
}

// setStateConfig sets what of stateTopicConfig an existing state topic
// lacks.
func (t *Topic) setStateConfig(ctx context.Context, topic string) error {
	have := map[string]string{}
	rc, err := t.adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var c kadm.ResourceConfig
		if c, err = rc.On(topic, nil); err == nil {
			err = c.Err
			for _, kv := range c.Configs {
				if kv.Value != nil {
					have[kv.Key] = *kv.Value
				}
			}
		}
	}
	var set []kadm.AlterConfig
	var fix []string
	for _, kv := range stateTopicConfig {
		if have[kv[0]] != kv[1] {
			set = append(set, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[0], Value: kadm.StringPtr(kv[1])})
			fix = append(fix, kv[0]+"="+kv[1])
		}
	}
	if err == nil && len(set) > 0 {
		var res kadm.AlterConfigsResponses
		res, err = t.adm.AlterTopicConfigs(ctx, set, topic)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
	}
	if err != nil {
		return t.connErr(ctx, fmt.Sprintf("set up the state topic %s (it must keep every record, uncompacted, with the broker's timestamps: kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config %s)",
			topic, topic, strings.Join(fix, ",")), err)
	}
	return nil
}

// slowAfter is how long a step runs before Stderr is told what it waits
// for.
const slowAfter = 2 * time.Second

// slow says on Stderr what the step that starts now waits for, once it
// has taken slowAfter; call the returned function when it ends.
func (t *Topic) slow(what string) func() {
	if t.stderr == nil {
		return func() {}
	}
	start := time.Now()
	timer := time.AfterFunc(slowAfter, func() {
		fmt.Fprintf(t.stderr, "dlqctl: %s: %s\n", t, what)
	})
	return func() {
		if !timer.Stop() && time.Since(start) >= slowAfter {
			fmt.Fprintf(t.stderr, "dlqctl: %s: waited %s\n", t, time.Since(start).Round(100*time.Millisecond))
		}
	}
}
