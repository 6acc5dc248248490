//go:build !no_sqs

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
	"github.com/dlqctl/dlqctl/envelope"
)

// sqsMode consumes a queue; its redrive policy dead-letters. --create
// makes the queue and its DLQ, with that policy.
func sqsMode() mode {
	return mode{
		prefixes: []string{"sqs://"},
		usage:    "sqs://QUEUE?region=R&endpoint=URL",
		help:     "sqs://QUEUE?region=R[&endpoint=URL]",
		open: func(ctx context.Context, opts Options, _ io.Writer) (Source, error) {
			return openSQSSource(ctx, opts.Source)
		},
		create: func(ctx context.Context, opts Options, stdout io.Writer) error {
			return createSQS(ctx, opts.Source, opts.DLQ, opts.MaxDeliveries, stdout)
		},
	}
}

// sqsSource reads an SQS queue as a production consumer does: receive,
// process, delete. A failed delivery is handed back (visibility 0) and
// never deleted, so that the queue's own redrive policy dead-letters it
// once it has been received maxReceiveCount times, as in production: SQS
// cannot carry a last_error onto the dead letter, so --fail-error does
// not reach the DLQ here.
type sqsSource struct {
	c     *sqs.Client
	url   string
	names envelope.FieldNames
	buf   []types.Message
}

// openSQSSource opens sqs://QUEUE?region=R[&endpoint=URL]; credentials
// come from the standard AWS chain.
func openSQSSource(ctx context.Context, raw string) (*sqsSource, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, usagef("--source %s: want sqs://QUEUE?region=R[&endpoint=URL]", sourceURL(raw))
	}
	q, err := sourceQuery(raw, u.RawQuery, u.User != nil, "region", "endpoint")
	if err != nil {
		return nil, err
	}
	var lo []func(*config.LoadOptions) error
	if r := q.Get("region"); r != "" {
		lo = append(lo, config.WithRegion(r))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("sqs: AWS configuration: %w", err)
	}
	c := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if e := q.Get("endpoint"); e != "" {
			o.BaseEndpoint = aws.String(e)
		}
	})
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(u.Host)})
	if err != nil {
		return nil, fmt.Errorf("sqs: find queue %s: %w", u.Host, err)
	}
	return &sqsSource{c: c, url: aws.ToString(out.QueueUrl), names: envelope.DefaultFieldNames()}, nil
}

func (s *sqsSource) Next(ctx context.Context) (Message, Receipt, error) {
	if len(s.buf) == 0 {
		out, err := s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.url), MaxNumberOfMessages: readCount,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if ctx.Err() != nil {
				return Message{}, nil, ctx.Err()
			}
			return Message{}, nil, fmt.Errorf("sqs: receive from %s: %w", s.url, err)
		}
		if len(out.Messages) == 0 {
			select {
			case <-time.After(pollWait):
			case <-ctx.Done():
				return Message{}, nil, ctx.Err()
			}
			return Message{}, nil, errIdle
		}
		s.buf = out.Messages
	}
	m := s.buf[0]
	s.buf = s.buf[1:]
	sm := sqsdlq.SQSMessage{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Attributes: m.Attributes, MessageAttributes: map[string]string{}}
	for k, v := range m.MessageAttributes {
		if strings.HasPrefix(aws.ToString(v.DataType), "Binary") {
			continue
		}
		sm.MessageAttributes[k] = aws.ToString(v.StringValue)
	}
	e := sqsdlq.FromSQS(sm, envelope.EventIDSource{Kind: "attribute"}, s.names)
	return Message{ID: sm.ID, Envelope: e}, &sqsReceipt{s: s, id: sm.ID, handle: m.ReceiptHandle}, nil
}

// sqsReceipt is one message received, invisible to other consumers until
// its visibility timeout ends.
type sqsReceipt struct {
	s      *sqsSource
	id     string  // the message ID
	handle *string // the receipt handle of this receive
}

func (r *sqsReceipt) Ack(ctx context.Context) error {
	if _, err := r.s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.s.url), ReceiptHandle: r.handle}); err != nil {
		return fmt.Errorf("sqs: delete %s: %w", r.id, err)
	}
	return nil
}

// DeadLetter hands the message back at once; the queue's redrive policy
// moves it to the DLQ after maxReceiveCount receives.
func (r *sqsReceipt) DeadLetter(ctx context.Context, _ DeadLetter) error {
	_, err := r.s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(r.s.url), ReceiptHandle: r.handle, VisibilityTimeout: 0})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("sqs: hand back %s: %w", r.id, err)
	}
	return nil
}

func (s *sqsSource) Close() error { return nil }

func createSQS(ctx context.Context, raw, dlq string, maxReceive int, stdout io.Writer) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return usagef("--source %s: want sqs://QUEUE?region=R[&endpoint=URL]", sourceURL(raw))
	}
	queue, q := u.Host, u.Query()
	fifo := strings.HasSuffix(queue, ".fifo")
	if dlq == "" {
		dlq = strings.TrimSuffix(queue, ".fifo") + "-dlq"
		if fifo {
			dlq += ".fifo"
		}
	}
	var lo []func(*config.LoadOptions) error
	if r := q.Get("region"); r != "" {
		lo = append(lo, config.WithRegion(r))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return fmt.Errorf("sqs: AWS configuration: %w", err)
	}
	c := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if e := q.Get("endpoint"); e != "" {
			o.BaseEndpoint = aws.String(e)
		}
	})
	dlqURL, err := createQueue(ctx, c, dlq, fifo, stdout)
	if err != nil {
		return err
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("sqs: the ARN of %s: %w", dlq, err)
	}
	queueURL, err := createQueue(ctx, c, queue, fifo, stdout)
	if err != nil {
		return err
	}
	policy, _ := json.Marshal(map[string]string{
		"deadLetterTargetArn": attrs.Attributes[string(types.QueueAttributeNameQueueArn)],
		"maxReceiveCount":     strconv.Itoa(maxReceive),
	})
	if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		Attributes: map[string]string{string(types.QueueAttributeNameRedrivePolicy): string(policy)}}); err != nil {
		return fmt.Errorf("sqs: set the redrive policy of %s: %w", queue, err)
	}
	fmt.Fprintf(stdout, "queue %s dead-letters into %s after %d receives\n", queue, dlq, maxReceive)
	return nil
}

// createQueue returns the URL of the queue, made if it does not exist.
func createQueue(ctx context.Context, c *sqs.Client, name string, fifo bool, stdout io.Writer) (string, error) {
	if out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err == nil {
		fmt.Fprintf(stdout, "queue %s exists\n", name)
		return aws.ToString(out.QueueUrl), nil
	}
	in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
	if fifo {
		in.Attributes = map[string]string{string(types.QueueAttributeNameFifoQueue): "true"}
	}
	out, err := c.CreateQueue(ctx, in)
	if err != nil {
		return "", fmt.Errorf("sqs: create %s: %w", name, err)
	}
	fmt.Fprintf(stdout, "created queue %s\n", name)
	return aws.ToString(out.QueueUrl), nil
}
