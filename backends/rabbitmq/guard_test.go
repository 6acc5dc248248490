package rabbitmq

import (
	"context"
	"testing"
)

func TestGuardDestination(t *testing.T) {
	q := &Queue{src: sourceURL{queue: "orders-dlq"}}
	for dest, refused := range map[string]bool{
		"orders":                          false,
		"orders-dlq":                      true,
		"exchange:amq.default/orders-dlq": true,
		"dlqctl.lease.orders-dlq":         true,
		"dlqctl.reads.orders-dlq":         true,
		"exchange:orders-x/orders-dlq":    false, // routed by bindings, not checked
		"exchange:/orders":                true,  // not a destination at all
	} {
		err := q.GuardDestination(context.Background(), dest)
		if (err != nil) != refused {
			t.Errorf("GuardDestination(%q) = %v, want refused %v", dest, err, refused)
		}
	}
}
