package sqsdlq

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A scan receives with a short visibility timeout and extends it while it
// lives, instead of one sized for the whole DLQ up front: a scan killed
// with -9 then hides the DLQ for at most scanVisibility (or, for a scan
// that had already run longer, twice its age), not for hours.
const (
	// scanVisibility is the visibility timeout a scan receives with
	// (Queue.scanVis; tests shorten it). A held batch is extended when
	// its visibility ends within a third of it; the extender looks every
	// twelfth of it.
	scanVisibility = 30 * time.Second
	// maxVisibility is SQS's longest visibility timeout.
	maxVisibility = 12 * time.Hour
)

// heldBatch is the receipt handles of one receive call and when their
// visibility ends.
type heldBatch struct {
	handles []*string
	// i, j: the batch is handles [i, j) of the extender's src instead.
	i, j  int
	until time.Time
}

// extender keeps a live scan's messages invisible: every scanVis/12 it
// gives each batch whose visibility is about to end a new timeout of twice
// the scan's age so far (at least scanVisibility), with
// ChangeMessageVisibilityBatch, one call per received batch, receivers
// calls in parallel. It only ever holds receipt handles.
type extender struct {
	q     *Queue
	start time.Time
	// src, when set, holds the handles of batches added by range.
	src interface {
		scanHandles(i, j int) ([]string, error)
	}
	mu      sync.Mutex
	batches []*heldBatch
	// extended counts ChangeMessageVisibility entries sent (tests).
	extended int
	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}
}

func (q *Queue) startExtender() *extender {
	e := &extender{q: q, start: q.now(), quit: make(chan struct{}), done: make(chan struct{})}
	go e.run()
	return e
}

// add records the handles of one receive made at `at` with visibility vis.
func (e *extender) add(msgs []types.Message, at time.Time, vis time.Duration) {
	if e == nil || len(msgs) == 0 {
		return
	}
	b := &heldBatch{handles: make([]*string, len(msgs)), until: at.Add(vis)}
	for i, m := range msgs {
		b.handles[i] = m.ReceiptHandle
	}
	e.mu.Lock()
	e.batches = append(e.batches, b)
	e.mu.Unlock()
}

// addRange records handles [i, j) of src, received at `at` with
// visibility vis.
func (e *extender) addRange(i, j int, at time.Time, vis time.Duration) {
	if e == nil || i >= j {
		return
	}
	e.mu.Lock()
	e.batches = append(e.batches, &heldBatch{i: i, j: j, until: at.Add(vis)})
	e.mu.Unlock()
}

// stop ends the extender and waits for an extension under way, so that
// nothing is made invisible again after the caller releases the messages.
func (e *extender) stop() {
	if e == nil {
		return
	}
	e.stopOnce.Do(func() { close(e.quit) })
	<-e.done
}

func (e *extender) run() {
	defer close(e.done)
	base := e.q.scanVis
	margin := base / 3
	t := time.NewTicker(base / 12)
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
		}
		now := e.q.now()
		vis := min(max(2*now.Sub(e.start), base), maxVisibility).Round(time.Second)
		e.mu.Lock()
		var due []*heldBatch
		for _, b := range e.batches {
			if b.until.Sub(now) < margin {
				due = append(due, b)
			}
		}
		e.mu.Unlock()
		if len(due) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), margin)
		e.extend(ctx, due, vis)
		cancel()
	}
}

// extend sets the visibility of the due batches to vis. A batch whose call
// fails keeps its old deadline and is tried again next tick; a handle SQS
// no longer accepts (the message was received again) needs nothing.
func (e *extender) extend(ctx context.Context, due []*heldBatch, vis time.Duration) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(e.q.src.receivers, 1))
	for _, b := range due {
		select {
		case <-e.quit:
			// Stopping: the caller is about to release everything.
			wg.Wait()
			return
		default:
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			at := e.q.now()
			handles := b.handles
			if handles == nil && e.src != nil {
				hs, err := e.src.scanHandles(b.i, b.j)
				if err != nil {
					return
				}
				for _, h := range hs {
					handles = append(handles, aws.String(h))
				}
			}
			entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(handles))
			for j, h := range handles {
				entries[j] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: h, VisibilityTimeout: int32(vis / time.Second)}
			}
			if _, err := e.q.c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(e.q.url), Entries: entries}); err != nil {
				return
			}
			e.mu.Lock()
			b.until = at.Add(vis)
			e.extended += len(entries)
			e.mu.Unlock()
		}()
	}
	wg.Wait()
}
