package templates

import (
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkMinerDistinct: every error a text of its own, as when errors
// carry an order ID, so each is masked and mined (the cost of a DLQ the
// memo does not help).
func BenchmarkMinerDistinct(b *testing.B) {
	_, msgs := readLabelled(b, filepath.Join("testdata", "dlqerrors.tsv"))
	m := New(Default())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Add(msgs[i%len(msgs)] + " (event evt-" + strconv.Itoa(i) + ")")
	}
	m.Groups()
}

// BenchmarkMinerRepeated: a few errors met again and again, as in the
// bench's DLQ.
func BenchmarkMinerRepeated(b *testing.B) {
	_, msgs := readLabelled(b, filepath.Join("testdata", "dlqerrors.tsv"))
	msgs = msgs[:20]
	m := New(Default())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Add(msgs[i%len(msgs)])
	}
	m.Groups()
}
