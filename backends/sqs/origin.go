package sqsdlq

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqctl/dlqctl/backend"
)

// CheckOrigin: a redrive sends to the source queue, which must exist
// (backend.OriginChecker).
func (q *Queue) CheckOrigin(ctx context.Context, queue string, _ []string) backend.OriginStatus {
	_, err := q.c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
	switch {
	case isCode(err, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"):
		return backend.OriginStatus{Detail: fmt.Sprintf("queue %q does not exist", queue),
			Fix: fmt.Sprintf("create %q, or redrive with --to", queue)}
	case err != nil:
		return backend.OriginStatus{Detail: q.wrap(ctx, "find the queue "+queue, err).Error(), Fix: "check the endpoint and the credentials"}
	}
	return backend.OriginStatus{OK: true, Detail: "exists"}
}
