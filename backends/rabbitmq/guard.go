package rabbitmq

import (
	"context"
	"fmt"
	"strings"
)

// GuardDestination refuses the DLQ itself and dlqctl's own queues
// (dlqctl.lease.…, dlqctl.reads.…, dlqctl.removed.…, dlqctl.epoch.…):
// anyone who can dead-letter a message writes its x-death, and so chooses
// where a redrive would send it. A publish to the DLQ would bring the
// entry straight back; one to a bookkeeping queue would forge who holds
// the lease, how often a quorum DLQ was read, or what was removed. An exchange other than the default one routes by bindings
// that can change after the plan, so it is not checked here.
func (q *Queue) GuardDestination(_ context.Context, raw string) error {
	d, err := parseDest(raw)
	if err != nil {
		return err
	}
	if d.exchange != "" && d.exchange != "amq.default" {
		return nil
	}
	switch {
	case d.key == q.src.queue:
		return fmt.Errorf("%q is this DLQ's own queue", d.key)
	case strings.HasPrefix(d.key, "dlqctl."):
		return fmt.Errorf("%q is a dlqctl bookkeeping queue (dlqctl.…), not a destination", d.key)
	}
	return nil
}
