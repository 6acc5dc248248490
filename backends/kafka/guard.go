package kafkadlq

import (
	"context"
	"fmt"
	"strings"
)

// defaultStateSuffix names a DLT's state topic unless state_topic= says
// otherwise; any topic with it is some DLT's dlqctl bookkeeping.
const defaultStateSuffix = ".dlqctl-state"

// GuardDestination refuses a redrive destination that is this DLT, its
// state topic (the URL's, the one recorded for the DLT, or any topic named
// like a dlqctl state topic) or a Kafka internal topic (__consumer_offsets,
// __transaction_state, …). Every consumer of a DLT can write a dead letter
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
	return nil
}

// recordedStateTopic is the state topic recorded for this DLT, "" until
// it has been read.
func (t *Topic) recordedStateTopic() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.claimed
}
