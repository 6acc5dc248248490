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
// DLQ (written in the redrive's transaction), records that are never
// transactional: the lease records (leaseKey) and the claims that bind
// the DLT to its state topic (claimKeyPrefix, claim.go). They are read
// read_uncommitted, so that a transaction a crashed run left open never
// hides who holds the lease.

// claimKeyPrefix starts the key of a claim record.
const claimKeyPrefix = "dlqctl-claim/"

// logAppendTime makes the broker stamp each record with its own clock.
const logAppendTime = "LogAppendTime"

func isMetaKey(k string) bool { return k == leaseKey || strings.HasPrefix(k, claimKeyPrefix) }

// meta is the lease and claim records of a state topic, in log order.
type meta struct {
	leases []leaseRecord
	claims []claimRecord
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
		return meta{}, err
	}
	var s *span
	for i := range spans {
		if spans[i].partition == 0 {
			s = &spans[i]
		}
	}
	if s == nil {
		return meta{}, nil
	}
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	c := t.metas[topic]
	if c == nil || c.upTo > s.hwm || c.upTo < s.start {
		// First read, or the topic was made again.
		c = &metaCache{upTo: s.start}
	}
	if c.upTo >= s.hwm {
		return c.m, nil
	}
	m := meta{leases: append([]leaseRecord(nil), c.m.leases...), claims: append([]claimRecord(nil), c.m.claims...)}
	err = t.readRangeIso(ctx, topic, map[int32][2]int64{0: {c.upTo, s.hwm}}, kgo.ReadUncommitted(), func(r *kgo.Record) error {
		k := string(r.Key)
		switch {
		case k == leaseKey:
			var l leaseRecord
			if json.Unmarshal(r.Value, &l) == nil {
				l.offset, l.ts = r.Offset, r.Timestamp
				m.leases = append(m.leases, l)
			}
		case strings.HasPrefix(k, claimKeyPrefix):
			var cl claimRecord
			if json.Unmarshal(r.Value, &cl) == nil && cl.StateTopic != "" {
				cl.offset = r.Offset
				m.claims = append(m.claims, cl)
			}
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

// brokerTimestamps makes sure the state topic's records carry the
// broker's time (message.timestamp.type=LogAppendTime), setting it on a
// state topic made before dlqctl asked for it.
func (t *Topic) brokerTimestamps(ctx context.Context, topic string) error {
	rc, err := t.adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var c kadm.ResourceConfig
		if c, err = rc.On(topic, nil); err == nil {
			err = c.Err
			for _, kv := range c.Configs {
				if kv.Key == "message.timestamp.type" && kv.Value != nil && *kv.Value == logAppendTime {
					return nil
				}
			}
		}
	}
	if err == nil {
		v := logAppendTime
		var res kadm.AlterConfigsResponses
		res, err = t.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.timestamp.type", Value: &v}}, topic)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
	}
	if err != nil {
		return t.connErr(ctx, fmt.Sprintf("set message.timestamp.type=LogAppendTime on the state topic %s (the lease is timed by the broker's clock; kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config message.timestamp.type=LogAppendTime)", topic, topic), err)
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
