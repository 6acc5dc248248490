package rabbitmq

import (
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

func testBase(c byte) base {
	var b base
	for i := range b {
		b[i] = c
	}
	return b
}

// TestPageMAC: a page reads back under its key; under another key, with
// its body or a header changed, or bound to another DLQ, it is forged.
func TestPageMAC(t *testing.T) {
	key := []byte(strings.Repeat("k", keyLen))
	p := page{run: "run-1", epoch: "e1", shape: shapeQueue, entries: []removal{{b: testBase(1), n: 3, rank: 2}, {b: testBase(2), n: 1, rank: 1}}}
	m := p.encode(key, "/dlq")
	d := &amqp.Delivery{Headers: m.Headers, Body: m.Body}
	got, err := decodePage(d, key, "/dlq")
	if err != nil || len(got.entries) != 2 || got.entries[0] != p.entries[0] || got.run != "run-1" || got.epoch != "e1" {
		t.Fatalf("decode: %+v %v", got, err)
	}
	other := []byte(strings.Repeat("x", keyLen))
	if _, err := decodePage(d, other, "/dlq"); err != errForged {
		t.Errorf("under another key: %v", err)
	}
	if _, err := decodePage(d, key, "/other"); err != errForged {
		t.Errorf("bound to another DLQ: %v", err)
	}
	body := append([]byte(nil), m.Body...)
	body[0] ^= 1
	if _, err := decodePage(&amqp.Delivery{Headers: m.Headers, Body: body}, key, "/dlq"); err != errForged {
		t.Errorf("with its body changed: %v", err)
	}
	h := amqp.Table{}
	for k, v := range m.Headers {
		h[k] = v
	}
	h[hRecEpoch] = "e0"
	if _, err := decodePage(&amqp.Delivery{Headers: h, Body: m.Body}, key, "/dlq"); err != errForged {
		t.Errorf("with its epoch changed: %v", err)
	}
	if _, err := decodePage(&amqp.Delivery{Body: m.Body}, key, "/dlq"); err != errForged {
		t.Errorf("without headers: %v", err)
	}
}

// TestCopyRanks: identical copies keep their ids as others leave; only
// entries of an earlier epoch hide a copy; a copy beyond those expected in
// the same epoch (a failed ack, the same content again) is shown.
func TestCopyRanks(t *testing.T) {
	b := testBase(7)
	ids := func(set *removedSet, n int) []string {
		r := &copyRanks{set: set, seen: map[base]int64{}}
		var out []string
		for range n {
			id, hidden := r.next(b)
			if hidden {
				id = "hidden"
			}
			out = append(out, strings.TrimPrefix(id, b.String()))
		}
		return out
	}
	join := func(s []string) string { return strings.Join(s, ",") }
	if got := join(ids(nil, 3)); got != ",-2,-3" {
		t.Errorf("no record: %s", got)
	}
	set := newRemovedSet(shapeQueue)
	set.epoch = "e1"
	set.add("e1", []removal{{b: b, n: 3, rank: 1}})
	if got := join(ids(set, 2)); got != "-2,-3" {
		t.Errorf("the first of three removed: %s, want -2,-3", got)
	}
	// The ack failed, or the same content came again, within the epoch: it
	// shows, with the removed rank.
	if got := join(ids(set, 3)); got != "-2,-3," {
		t.Errorf("three copies, one removed in this epoch: %s", got)
	}
	// After a restart the removed copy that came back is hidden.
	set.epoch = "e2"
	if got := join(ids(set, 3)); got != "-2,-3,hidden" {
		t.Errorf("three copies, one removed before the restart: %s", got)
	}
	set.add("e2", []removal{{b: b, n: 2, rank: 3}})
	if got := join(ids(set, 1)); got != "-2" {
		t.Errorf("ranks 1 and 3 removed: %s", got)
	}
	set.epoch = "e3"
	if got := join(ids(set, 3)); got != "-2,hidden,hidden" {
		t.Errorf("after another restart, both removed copies back: %s", got)
	}
	if r := hiddenRank(set.bases[b], "e3"); r != 1 {
		t.Errorf("hiddenRank %d, want 1", r)
	}
}

// TestSplitID: an id is a 24-digit hash and, for copies after the first,
// a rank from 2.
func TestSplitID(t *testing.T) {
	b := testBase(0xab)
	for id, want := range map[string]int64{b.String(): 1, b.String() + "-2": 2, b.String() + "-17": 17} {
		got, rank, ok := splitID(id)
		if !ok || got != b || rank != want {
			t.Errorf("%s: %v %d %v", id, got, rank, ok)
		}
	}
	for _, id := range []string{"", "zz", b.String() + "-1", b.String() + "-x", b.String()[:20], "123"} {
		if _, _, ok := splitID(id); ok {
			t.Errorf("%q read as an id", id)
		}
	}
}
