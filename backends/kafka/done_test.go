package kafkadlq

import (
	"fmt"
	"testing"
)

// fillDone is a done-set of n entries over 4 partitions, in the order a
// redrive writes them.
func fillDone(n int) *doneSet {
	d := newDoneSet("T1")
	for i := range n {
		d.set(KafkaID(int32(i%4), int64(i/4)), stateRecord{Status: StatusRedriven, TopicID: "T1"})
	}
	return d
}

func TestDoneSetCounts(t *testing.T) {
	d := fillDone(1000) // offsets 0..249 in each partition
	if got := d.countIn(1, 10, 20); got != 10 {
		t.Fatalf("countIn(1, 10, 20) = %d", got)
	}
	if got := d.countIn(0, 240, 400); got != 10 {
		t.Fatalf("countIn past the end = %d", got)
	}
	d.set(KafkaID(1, 16), stateRecord{Status: StatusResolved, TopicID: "T1"}) // again: counted once
	d.set(KafkaID(1, 17), stateRecord{Status: StatusRedriven, TopicID: "T0"}) // another topic's
	d.set(KafkaID(1, 300), stateRecord{Status: StatusRedriven})               // from before topic IDs
	if got := d.countIn(1, 10, 20); got != 9 {
		t.Fatalf("after another topic's record: %d", got)
	}
	if got := d.countIn(1, 250, 301); got != 1 {
		t.Fatalf("a record without topic ID: %d", got)
	}
	// Counting allocates nothing and looks at no entry one by one, however
	// many there are: Len's cost per batch does not grow with the run.
	big := fillDone(250_000)
	if a := testing.AllocsPerRun(100, func() { big.countIn(2, 1000, 60_000) }); a != 0 {
		t.Fatalf("countIn allocates %v times", a)
	}
}

// BenchmarkDoneCount is Len's work past the broker requests, at the
// start and at the end of a 250,000-entry redrive: it stays flat (it was
// a copy and parse of every entry, 29 ms per batch at the start and
// 138 ms at the end).
func BenchmarkDoneCount(b *testing.B) {
	for _, n := range []int{1_000, 250_000} {
		d := fillDone(n)
		b.Run(fmt.Sprintf("done=%d", n), func(b *testing.B) {
			for b.Loop() {
				for p := range int32(4) {
					d.countIn(p, 0, 1<<40)
				}
			}
		})
	}
}
