package sqsdlq

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// HeldReceipt is the receipt handle a Publish holds for id ("" for none),
// for tests that expire it from outside.
func (q *Queue) HeldReceipt(id string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return aws.ToString(q.held[id].msg.ReceiptHandle)
}

// SetScanVisibility shortens the visibility timeout scans receive with,
// so that a test sees the extender at work in seconds.
func (q *Queue) SetScanVisibility(d time.Duration) { q.scanVis = d }

// SetHandleBound sets how many receipt handles a scan keeps in memory.
func (q *Queue) SetHandleBound(n int) { q.handleBound = n }

// SetLeaseRenew shortens how often a held lease is renewed, so that a
// test sees a holder notice a takeover in seconds.
func (q *Queue) SetLeaseRenew(d time.Duration) { q.leaseEvery = d }
