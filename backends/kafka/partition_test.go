package kafkadlq

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDestPartitionMatchesJava pins the partitions that the Java client's
// default partitioner picks (Utils.toPositive(Utils.murmur2(key)) % n,
// computed with kafka-clients 4.4.0) for keys without an original
// partition header.
func TestDestPartitionMatchesJava(t *testing.T) {
	java := []struct {
		key        string
		six, three int32
	}{
		{"order-1", 4, 1}, {"order-2", 3, 0}, {"k1", 5, 2}, {"k2", 3, 0}, {"k3", 4, 1},
		{"a-much-longer-key-with-more-bytes", 2, 2}, {"é", 3, 0},
	}
	for _, c := range java {
		src := &kgo.Record{Key: []byte(c.key)}
		out := &kgo.Record{Key: []byte(c.key)}
		if got := destPartition(src, out, "orders", 6); got != c.six {
			t.Errorf("%q over 6: %d, Java %d", c.key, got, c.six)
		}
		if got := destPartition(src, out, "orders", 3); got != c.three {
			t.Errorf("%q over 3: %d, Java %d", c.key, got, c.three)
		}
	}
}
