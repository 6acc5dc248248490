package sqsdlq

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestHandleStoreBound: past its bound a handle store keeps handles in its
// temporary file, not in memory, and gives every range back unchanged,
// across the boundary too.
func TestHandleStoreBound(t *testing.T) {
	h := &handleStore{bound: 10}
	defer h.close()
	var want []string
	for i := range 137 {
		s := fmt.Sprintf("handle-%d-%s", i, string(make([]byte, i%7)))
		want = append(want, s)
		if err := h.add(s); err != nil {
			t.Fatal(err)
		}
	}
	if h.inMemory() != 10 || h.len() != 137 {
		t.Fatalf("in memory %d, total %d; want 10, 137", h.inMemory(), h.len())
	}
	for _, r := range [][2]int{{0, 10}, {5, 15}, {10, 11}, {0, 137}, {136, 137}, {40, 90}} {
		got, err := h.get(r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != r[1]-r[0] {
			t.Fatalf("get%v: %d handles", r, len(got))
		}
		for i, g := range got {
			if g != want[r[0]+i] {
				t.Fatalf("get%v[%d] = %q, want %q", r, i, g, want[r[0]+i])
			}
		}
	}
}

// TestScanStoreOrder: sealed, a scan's messages come back in dead-letter
// order — standard queues by sent time then MessageId, FIFO queues by
// group (the group of the oldest message first), then sequence number —
// with a message received twice kept once, and each index entry 40 bytes.
func TestScanStoreOrder(t *testing.T) {
	if size := unsafe.Sizeof(scanEntry{}); size != 40 {
		t.Errorf("scanEntry is %d bytes, want 40", size)
	}
	msg := func(id string, sent int, group, seq string) types.Message {
		attrs := map[string]string{"SentTimestamp": fmt.Sprint(sent)}
		if group != "" {
			attrs["MessageGroupId"], attrs["SequenceNumber"] = group, seq
		}
		return types.Message{MessageId: aws.String(id), Body: aws.String("body of " + id), ReceiptHandle: aws.String("h-" + id), Attributes: attrs}
	}
	read := func(s *scanStore) []string {
		var ids []string
		for i := range s.index {
			m, err := s.message(i)
			if err != nil {
				t.Fatal(err)
			}
			if string(s.id(&s.index[i])) != aws.ToString(m.MessageId) || aws.ToString(m.Body) != "body of "+aws.ToString(m.MessageId) {
				t.Fatalf("entry %d: key %q, message %q %q", i, s.id(&s.index[i]), aws.ToString(m.MessageId), aws.ToString(m.Body))
			}
			ids = append(ids, aws.ToString(m.MessageId))
		}
		return ids
	}
	for _, tc := range []struct {
		name string
		fifo bool
		in   [][]types.Message
		want []string
	}{
		{"standard", false, [][]types.Message{
			{msg("c", 200, "", ""), msg("b", 100, "", ""), msg("a", 200, "", "")},
			{msg("b", 100, "", ""), msg("d", 50, "", "")},
		}, []string{"d", "b", "a", "c"}},
		{"fifo", true, [][]types.Message{
			{msg("g2-late", 300, "g2", "9"), msg("g1-b", 400, "g1", "20"), msg("g2-early", 100, "g2", "10")},
			{msg("g1-a", 50, "g1", "3"), msg("g1-b", 400, "g1", "20")},
		}, []string{"g1-a", "g1-b", "g2-late", "g2-early"}},
	} {
		s, err := newScanStore(handleBound)
		if err != nil {
			t.Fatal(err)
		}
		s.reserve(3)
		for _, batch := range tc.in {
			s.add(batch)
		}
		if err := s.seal(tc.fifo); err != nil {
			t.Fatal(err)
		}
		if got := read(s); !slices.Equal(got, tc.want) {
			t.Errorf("%s: order %v, want %v", tc.name, got, tc.want)
		}
		if s.handles.len() != 5 {
			t.Errorf("%s: %d handles kept, want 5 (both of a message received twice)", tc.name, s.handles.len())
		}
		s.close()
	}
}
