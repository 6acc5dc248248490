package rabbitmq

import (
	"slices"

	amqp "github.com/rabbitmq/amqp091-go"
)

// One ack per message costs a frame each way through the client's writer
// and one operation each in the broker: 2,048 of them per chunk were a
// fifth of an unthrottled redrive's time. An ack with multiple set takes
// every unacknowledged delivery of the channel up to its tag, so where a
// chunk's messages are the head of what the read received, as they are
// when a redrive takes the whole DLQ, one ack covers them. It is used
// only as far as that is exact: the first delivery the read received that
// must stay (not planned, refused, failed) ends the prefix, and everything
// after it is acked one by one.

// ackPlan splits the acks of the deliveries in ack into one ack with
// multiple set (upTo, 0 for none) and single acks for the rest, in
// ascending order. order is every tag the read received, in delivery
// order, on a channel of its own. The multiple ack covers the longest
// prefix of order whose tags run 1, 2, 3, … (a channel numbers its
// deliveries from 1, so no delivery the read did not see hides in it) and
// are all in ack: it never takes a delivery that ack does not name.
func ackPlan(order []uint64, ack map[uint64]bool) (upTo uint64, singles []uint64) {
	for i, t := range order {
		if t != uint64(i+1) || !ack[t] {
			break
		}
		upTo = t
	}
	for t := range ack {
		if t > upTo {
			singles = append(singles, t)
		}
	}
	slices.Sort(singles)
	return upTo, singles
}

// ackAll acks the deliveries in ack on ch as ackPlan splits them.
func ackAll(ch *amqp.Channel, order []uint64, ack map[uint64]bool) error {
	upTo, singles := ackPlan(order, ack)
	if upTo > 0 {
		if err := ch.Ack(upTo, true); err != nil {
			return err
		}
	}
	for _, t := range singles {
		if err := ch.Ack(t, false); err != nil {
			return err
		}
	}
	return nil
}
