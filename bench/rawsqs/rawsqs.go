// Package rawsqs is the benchmark's SQS baseline: what any Go program
// reading a whole SQS DLQ without deleting it does at the least with the
// plain aws-sdk-go-v2: receivers in parallel, 10 messages per call, a
// visibility timeout over the pass, then every message made visible again
// (ChangeMessageVisibilityBatch, 10 per call, with the same parallelism).
// Per message it json.Unmarshals the body into a map and computes its
// SHA-256. Like bench/raw it imports nothing from dlqctl.
package rawsqs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

var sink byte

// ReceiveAndRelease reads queueURL with receivers parallel receive loops
// until each has an empty answer once the queue's visible count (read
// first) is in hand — an empty short poll before that is followed by a
// long poll (1 s), and only an empty long poll ends it — then releases
// everything it received (the same end rule as dlqctl's scan). It returns the number of distinct messages read.
func ReceiveAndRelease(ctx context.Context, c *sqs.Client, queueURL string, receivers int, visibility int32) (int, error) {
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, err
	}
	expect, _ := strconv.Atoi(attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	rc := &receiver{c: c, queueURL: queueURL, visibility: visibility, expect: expect, handles: map[string]*string{}}
	var wg sync.WaitGroup
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc.loop(ctx)
		}()
	}
	wg.Wait()
	if rc.first != nil {
		return len(rc.handles), rc.first
	}
	list := make([]*string, 0, len(rc.handles))
	for _, h := range rc.handles {
		list = append(list, h)
	}
	return len(rc.handles), release(ctx, c, queueURL, receivers, list)
}

// receiver is the receive loops' shared state: every message's receipt
// handle by ID, and the first error.
type receiver struct {
	c          *sqs.Client
	queueURL   string
	visibility int32
	expect     int
	mu         sync.Mutex
	handles    map[string]*string
	first      error
}

// loop is one receive loop: it receives until an empty answer ends it.
func (rc *receiver) loop(ctx context.Context) {
	wait := int32(0)
	for {
		out, err := rc.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(rc.queueURL), MaxNumberOfMessages: 10, VisibilityTimeout: rc.visibility, WaitTimeSeconds: wait,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		rc.mu.Lock()
		if err != nil {
			if rc.first == nil {
				rc.first = err
			}
			rc.mu.Unlock()
			return
		}
		for _, m := range out.Messages {
			body := []byte(aws.ToString(m.Body))
			var doc map[string]any
			if err := json.Unmarshal(body, &doc); err != nil && rc.first == nil {
				rc.first = fmt.Errorf("message %s: body: %v", aws.ToString(m.MessageId), err)
			}
			sum := sha256.Sum256(body)
			sink ^= sum[0]
			rc.handles[aws.ToString(m.MessageId)] = m.ReceiptHandle
		}
		short := len(rc.handles) < rc.expect
		rc.mu.Unlock()
		if len(out.Messages) == 0 {
			if short && wait == 0 {
				wait = 1
				continue
			}
			return
		}
		wait = 0
	}
}

// release makes every message of list visible again, 10 per call, with
// workers parallel calls; it returns the first failure.
func release(ctx context.Context, c *sqs.Client, queueURL string, workers int, list []*string) error {
	var wg sync.WaitGroup
	work := make(chan []*string)
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			failed := false
			for part := range work {
				if failed {
					continue // keep draining, so the sender never blocks
				}
				entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(part))
				for i, h := range part {
					entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: h}
				}
				out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					// A message left invisible would be missing from the
					// next pass, whichever side runs it.
					err = fmt.Errorf("release: %s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					errs <- err
					failed = true
				}
			}
		}()
	}
	for i := 0; i < len(list); i += 10 {
		work <- list[i:min(i+10, len(list))]
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}
