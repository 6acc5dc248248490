package sqsdlq

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// What a destination takes. SQS reports its MaximumMessageSize (256 KiB
// to 1 MiB), which bounds one message and one batch alike. An
// SQS-compatible server may report none (ElasticMQ takes 1 MiB): then
// max_message_size= gives it, or else no message is refused before the
// server has refused it, and a batch is kept to 256 KiB, which every SQS
// has taken. A refusal as too long is sent again smaller (sendPart), and
// a limit the refusal names is kept.

// errTooLarge: a message that would exceed the destination's size limit.
var errTooLarge = errors.New("message too large")

// defaultBatchBytes bounds a batch to a destination whose limit is
// unknown: 256 KiB, the limit SQS had for years and the lower of the two
// it has had.
const defaultBatchBytes = 256 * 1024

// limit is a destination's size limits in bytes. message is 0 when
// unknown: nothing is refused before the destination refuses it.
type limit struct {
	message int
	batch   int
}

// sizeLimit is the destination queue's limit (cached): its
// MaximumMessageSize, else max_message_size=, else unknown.
func (q *Queue) sizeLimit(ctx context.Context, destURL string) (limit, error) {
	q.mu.Lock()
	l, ok := q.destMax[destURL]
	q.mu.Unlock()
	if ok {
		return l, nil
	}
	out, err := q.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(destURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize},
	})
	if err != nil {
		return limit{}, q.wrap(ctx, "read the destination's MaximumMessageSize", err)
	}
	n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)])
	switch {
	case err == nil && n > 0:
		l = limit{message: n, batch: n}
	case q.src.maxMessageSize > 0:
		l = limit{message: q.src.maxMessageSize, batch: q.src.maxMessageSize}
	default:
		l = limit{batch: defaultBatchBytes}
	}
	q.mu.Lock()
	q.destMax[destURL] = l
	q.mu.Unlock()
	return l, nil
}

// tooLongError is a destination's refusal of a SendMessageBatch request
// as too long: nothing of it was enqueued. n is the limit the refusal
// names, 0 when it names none (ElasticMQ says only "MessageTooLong").
type tooLongError struct {
	msg string
	n   int
}

func (e *tooLongError) Error() string { return e.msg }

// namedLimit finds the limit in a refusal: "Message must be shorter than
// 262144 bytes", "Batch requests cannot be longer than 262144 bytes".
var namedLimit = regexp.MustCompile(`(?i)(?:shorter|longer) than (\d+) bytes`)

// asTooLong is err as a refusal for size, or nil. SQS answers
// BatchRequestTooLong for a batch and InvalidParameterValue naming the
// limit for a message; ElasticMQ InvalidAttributeValue "MessageTooLong".
func asTooLong(err error) *tooLongError {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return nil
	}
	text := ae.ErrorMessage()
	lower := strings.ToLower(text)
	if !isCode(err, "BatchRequestTooLong", "MessageTooLong") && !strings.Contains(lower, "toolong") && !strings.Contains(lower, "too long") && !namedLimit.MatchString(text) {
		return nil
	}
	tl := &tooLongError{msg: ae.ErrorCode() + ": " + text}
	if m := namedLimit.FindStringSubmatch(text); m != nil {
		tl.n, _ = strconv.Atoi(m[1])
	}
	return tl
}

// learnLimit keeps the limit a refusal named: for batches, or (batch
// false) for messages, and batches too, since no batch is smaller than
// its largest message.
func (q *Queue) learnLimit(destURL string, tl *tooLongError, batch bool) {
	if tl.n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.destMax[destURL]
	if batch {
		l.batch = min(l.batch, tl.n)
	} else {
		l.message, l.batch = tl.n, min(l.batch, tl.n)
	}
	q.destMax[destURL] = l
}

// messageSize is a message's size as SQS counts it against the limit: the
// body, and each message attribute's name, data type and value.
func messageSize(e types.SendMessageBatchRequestEntry) int {
	n := len(aws.ToString(e.MessageBody))
	for k, v := range e.MessageAttributes {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}
