package kafkadlq

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReaderBoundsItsFetches: every reader (scans, state reads, point
// reads) asks for at most 2 MiB a fetch and 512 KiB a partition, whatever
// franz-go's defaults are, so that what a scan holds in flight does not
// grow with the DLT's partitions. No broker is needed: the client is
// never used.
func TestReaderBoundsItsFetches(t *testing.T) {
	top := &Topic{src: sourceURL{brokers: []string{"127.0.0.1:1"}}}
	cl, err := top.reader("dlq", map[int32]int64{0: 0, 1: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.FetchMaxBytes); got != int32(2<<20) {
		t.Errorf("FetchMaxBytes = %v, want 2 MiB", got)
	}
	if got := cl.OptValue(kgo.FetchMaxPartitionBytes); got != int32(512<<10) {
		t.Errorf("FetchMaxPartitionBytes = %v, want 512 KiB", got)
	}
}
