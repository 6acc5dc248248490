package sqsdlq

import "github.com/aws/aws-sdk-go-v2/aws"

// HeldReceipt is the receipt handle a Publish holds for id ("" for none),
// for tests that expire it from outside.
func (q *Queue) HeldReceipt(id string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return aws.ToString(q.held[id].msg.ReceiptHandle)
}
