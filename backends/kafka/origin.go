package kafkadlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqctl/dlqctl/backend"
)

// CheckOrigin: a redrive produces to the origin topic, which must exist
// (brokers often refuse to create topics on produce) (backend.OriginChecker).
func (t *Topic) CheckOrigin(ctx context.Context, topic string, _ []string) backend.OriginStatus {
	n, err := t.partitions(ctx, topic)
	switch {
	case errors.Is(err, errNoTopic):
		return backend.OriginStatus{Detail: fmt.Sprintf("topic %q does not exist", topic),
			Fix: fmt.Sprintf("create %q (kafka-topics.sh --create --topic %s), or redrive with --to", topic, topic)}
	case err != nil:
		return backend.OriginStatus{Detail: err.Error(), Fix: "check the brokers"}
	}
	return backend.OriginStatus{OK: true, Detail: fmt.Sprintf("exists with %d partitions", n)}
}
