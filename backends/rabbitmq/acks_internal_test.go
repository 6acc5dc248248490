package rabbitmq

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAckPlanAcksExactlyWhatItIsGiven holds the multiple ack to the plain
// way, one ack per delivery: over random reads (deliveries numbered from
// 1, some wanted, a few the read never saw), the tags the plan acks —
// everything up to upTo, and the singles — are exactly those in ack.
func TestAckPlanAcksExactlyWhatItIsGiven(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := r.IntN(40)
		var order []uint64
		ack := map[uint64]bool{}
		for tag := uint64(1); tag <= uint64(n); tag++ {
			order = append(order, tag)
			if r.IntN(5) > 0 {
				ack[tag] = true
			}
		}
		if n > 0 && r.IntN(4) == 0 {
			// A read that missed a delivery (drained by a widen): the
			// prefix must stop before it.
			i := r.IntN(n)
			order = slices.Delete(order, i, i+1)
		}
		upTo, singles := ackPlan(order, ack)
		got := map[uint64]bool{}
		for tag := uint64(1); tag <= upTo; tag++ {
			got[tag] = true
		}
		for _, s := range singles {
			if got[s] {
				t.Fatalf("order %v ack %v: tag %d acked twice (upTo %d)", order, ack, s, upTo)
			}
			got[s] = true
		}
		for tag := range got {
			if !ack[tag] {
				t.Fatalf("order %v ack %v: plan acks tag %d, which must stay (upTo %d, singles %v)", order, ack, tag, upTo, singles)
			}
		}
		for tag := range ack {
			if !got[tag] {
				t.Fatalf("order %v ack %v: plan leaves tag %d unacked", order, ack, tag)
			}
		}
	}
}

func TestAckPlanOneAckForAWholeHead(t *testing.T) {
	order := []uint64{1, 2, 3, 4, 5}
	upTo, singles := ackPlan(order, map[uint64]bool{1: true, 2: true, 3: true, 4: true, 5: true})
	if upTo != 5 || len(singles) != 0 {
		t.Errorf("a whole head: upTo %d, singles %v; want 5 and none", upTo, singles)
	}
	upTo, singles = ackPlan(order, map[uint64]bool{1: true, 2: true, 4: true, 5: true})
	if upTo != 2 || !slices.Equal(singles, []uint64{4, 5}) {
		t.Errorf("tag 3 kept: upTo %d, singles %v; want 2 and [4 5]", upTo, singles)
	}
}
