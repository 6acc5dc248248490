package sqsdlq

import (
	"fmt"
	"testing"
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
