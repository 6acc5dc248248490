package kafkadlq

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// defaultStateSuffix names a DLT's state topic unless state_topic= says
// otherwise; any topic with it is some DLT's dlqctl bookkeeping.
const defaultStateSuffix = ".dlqctl-state"

// GuardDestination refuses a redrive destination that is this DLT, its
// state topic (the URL's, the one recorded for the DLT, or any topic named
// like a dlqctl state topic), any topic that holds dlqctl bookkeeping
// whatever its name (another DLT's state_topic=), or a Kafka internal
// topic (__consumer_offsets, __transaction_state, …). Every consumer of a DLT can write a dead letter
// whose headers name any original topic, so a planted
// kafka_dlt-original-topic must never make dlqctl write its own state or a
// broker's internals (backend.DestinationGuard).
func (t *Topic) GuardDestination(ctx context.Context, dest string) error {
	switch {
	case dest == t.src.topic:
		return fmt.Errorf("%q is this DLQ itself", dest)
	case dest == t.src.stateTopic:
		return fmt.Errorf("%q is this DLQ's state topic", dest)
	case dest == t.src.topic+defaultStateSuffix:
		return fmt.Errorf("%q is this DLQ's default state topic", dest)
	case strings.HasSuffix(dest, defaultStateSuffix):
		return fmt.Errorf("%q is named like a dlqctl state topic", dest)
	case strings.HasPrefix(dest, "__"):
		return fmt.Errorf("%q is a Kafka internal topic", dest)
	}
	if rec := t.recordedStateTopic(); rec != "" && dest == rec {
		return fmt.Errorf("%q is the state topic recorded for this DLQ", dest)
	}
	why, err := t.bookkeeping(ctx, dest)
	if err != nil {
		return &backend.GuardUnavailable{Err: err}
	}
	if why != "" {
		return fmt.Errorf("%q is a dlqctl state topic: %s", dest, why)
	}
	return nil
}

// bookkeeping says why dest holds dlqctl's bookkeeping, "" when it does
// not, by what it holds rather than its name: another DLT's state topic
// can be called anything (state_topic=). dlqctl writes a state topic's
// partition 0, and the first record there is one of its own (the format
// record, or in a topic an older dlqctl made, a lease, claim or state
// record). A topic that does not exist holds nothing. The answer is kept
// for the life of the Topic: a redrive asks it for every entry.
func (t *Topic) bookkeeping(ctx context.Context, dest string) (string, error) {
	t.mu.Lock()
	why, known := t.guarded[dest]
	t.mu.Unlock()
	if known {
		return why, nil
	}
	spans, ok, err := t.spans(ctx, dest)
	if err != nil {
		return "", err
	}
	var from, to int64
	for _, s := range spans {
		if s.partition == 0 {
			from, to = s.start, s.hwm
		}
	}
	if ok && from < to {
		err = t.readRangeIso(ctx, dest, map[int32][2]int64{0: {from, to}}, kgo.ReadUncommitted(), func(r *kgo.Record) error {
			k := string(r.Key)
			switch {
			case k == formatKey:
				why = "it holds dlqctl's format record"
			case k == leaseKey:
				why = "it holds dlqctl's lease records"
			case strings.HasPrefix(k, claimKeyPrefix):
				why = "it holds dlqctl's claim records"
			default:
				if _, ok := parseStateRecord(r); ok {
					why = "it holds dlqctl's state records"
				}
			}
			return backend.ErrStop
		})
		if err != nil {
			return "", err
		}
	}
	t.mu.Lock()
	if t.guarded == nil {
		t.guarded = map[string]string{}
	}
	t.guarded[dest] = why
	t.mu.Unlock()
	return why, nil
}

// recordedStateTopic is the state topic recorded for this DLT, "" until
// it has been read.
func (t *Topic) recordedStateTopic() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.claimed
}
