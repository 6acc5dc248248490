package rabbitmq

import (
	"context"
	"strconv"
)

// A redrive reads the DLQ after each batch to see which of its events
// came back. On a stream DLQ the tail is the last offset: what the DLX
// appends later comes after it. A classic or quorum queue has no
// offsets, and positions shift whenever a message ahead leaves, so there
// the watermark is the run itself: every message a redrive publishes
// carries the run's marker (dlqctl_run_id) in its headers, a dead-letter
// exchange keeps headers, so a dead letter of a redriven message carries
// it too, and an entry that sat in the DLQ all along (an identical copy
// left for a later batch) does not.

// runWatermark prefixes a classic or quorum DLQ's watermark: a scan after
// it gives the entries carrying that run's marker.
const runWatermark = "run:"

// Tail is the DLQ's watermark for a batch: the last offset of a stream
// DLQ (-1 when empty), else the run holding the lease ("" without one: the
// whole DLQ is read).
func (q *Queue) Tail(ctx context.Context) (string, error) {
	_, tail, err := q.LenTail(ctx)
	return tail, err
}

// LenTail is Len and Tail in one read.
func (q *Queue) LenTail(ctx context.Context) (int64, string, error) {
	if q.missing {
		return 0, "", nil
	}
	stream, err := q.streamShaped(ctx)
	if err != nil {
		return 0, "", err
	}
	if stream {
		n, last, err := q.streamLen(ctx)
		return n, strconv.FormatInt(last, 10), err
	}
	n, err := q.Len(ctx)
	if err != nil {
		return 0, "", err
	}
	q.mu.Lock()
	run := q.runID
	q.mu.Unlock()
	if run == "" {
		return n, "", nil
	}
	return n, runWatermark + run, nil
}
