package kafkadlq

import (
	"strings"
	"testing"
	"time"
)

// TestRetentionOf: the time left is the record's timestamp plus
// retention.ms, less now; a topic without a time limit has none; the
// basis names what the figure rests on and what can come sooner.
func TestRetentionOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	k, h := sourcePartition{"orders", 3}, heldRecord{offset: 12, ts: now.Add(-time.Hour)}
	r := retentionOf(k, h, map[string]string{"retention.ms": "7200000", "retention.bytes": "-1", "cleanup.policy": "delete"}, now)
	if r.Source != "orders/3" || r.Oldest != "orders/3:12" || !r.Limited || r.Left != time.Hour || !r.Until.Equal(now.Add(time.Hour)) ||
		r.Basis != "retention.ms 2h0m0s from the record's timestamp 2026-12-07T11:00:00Z" {
		t.Errorf("2h retention, record 1h old: %+v", r)
	}
	r = retentionOf(k, h, map[string]string{"retention.ms": "-1", "retention.bytes": "1048576", "cleanup.policy": "compact,delete"}, now)
	if r.Limited || !strings.Contains(r.Basis, "kept for ever by time") || !strings.Contains(r.Basis, "retention.bytes 1048576 can delete it sooner") ||
		!strings.Contains(r.Basis, "compaction") {
		t.Errorf("no time limit, a size limit, compacted: %+v", r)
	}
	if r := retentionOf(k, h, map[string]string{"retention.ms": "1000"}, now); !r.Limited || r.Left >= 0 {
		t.Errorf("past due: %+v, want a negative time left", r)
	}
}
