package rabbitmq

import "testing"

// TestDeliveryLimitAsTheBrokerResolvesIt: a quorum queue's effective
// delivery limit from its argument and policy, as each major version
// resolves them. On 3.x a value of 0 or below is a limit of 0 (measured on
// 3.10.8: the first return drops the message), never "none".
func TestDeliveryLimitAsTheBrokerResolvesIt(t *testing.T) {
	for _, c := range []struct {
		server      string
		arg, policy any // nil: not set
		limit       int
		limited     bool
	}{
		{"3.10.8", nil, nil, 0, false},
		{"3.10.8", 3.0, nil, 3, true},
		{"3.10.8", 0.0, nil, 0, true},
		{"3.10.8", -1.0, nil, 0, true},
		{"3.10.8", -5.0, nil, 0, true},
		{"3.10.8", nil, 0.0, 0, true},
		{"3.10.8", 3.0, 0.0, 0, true},
		{"3.10.8", -1.0, 2.0, 0, true},
		{"3.10.8", 5.0, 2.0, 2, true},
		{"4.0.5", nil, nil, 20, true},
		{"4.0.5", -1.0, nil, 0, false},
		{"4.0.5", nil, -1.0, 0, false},
		{"4.0.5", 0.0, nil, 0, true},
		{"4.0.5", -1.0, 5.0, 5, true},
		{"4.0.5", 3.0, 5.0, 3, true},
		{"4.0.5", -1.0, -1.0, 0, false},
	} {
		info := queueInfo{Type: "quorum", Arguments: map[string]any{}, Effective: map[string]any{}}
		if c.arg != nil {
			info.Arguments["x-delivery-limit"] = c.arg
		}
		if c.policy != nil {
			info.Effective["delivery-limit"] = c.policy
		}
		limit, limited := info.deliveryLimit(c.server)
		if limit != c.limit || limited != c.limited {
			t.Errorf("%s, argument %v, policy %v: limit %d (limited %v), want %d (%v)", c.server, c.arg, c.policy, limit, limited, c.limit, c.limited)
		}
	}
	if _, limited := (queueInfo{Type: "classic", Arguments: map[string]any{"x-delivery-limit": 0.0}}).deliveryLimit("3.10.8"); limited {
		t.Error("a classic queue has no delivery limit")
	}
}
