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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaCreatePartitions is the partition count of an origin topic that
// --create makes: more than one, so that per-partition order shows.
const kafkaCreatePartitions = 3

// create makes what a rehearsal needs and the broker does not make by
// itself: a Kafka origin topic and its DLT, or an SQS queue whose redrive
// policy dead-letters into its DLQ. What exists already is left as it is
// (an SQS queue gets the redrive policy).
func create(ctx context.Context, opts Options, stdout io.Writer) error {
	if strings.HasPrefix(opts.Source, "kafka://") {
		return createKafka(ctx, opts.Source, opts.DLQ, stdout)
	}
	return createSQS(ctx, opts.Source, opts.DLQ, opts.MaxDeliveries, stdout)
}

func createKafka(ctx context.Context, raw, dlq string, stdout io.Writer) error {
	hosts, query, _ := strings.Cut(strings.TrimPrefix(raw, "kafka://"), "?")
	q, err := url.ParseQuery(query)
	if err != nil || hosts == "" || q.Get("topic") == "" {
		return usagef("--source: --create needs kafka://HOST:PORT?topic=ORIGIN")
	}
	topic := q.Get("topic")
	if dlq == "" {
		dlq = topic + ".DLT"
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(hosts, ",")...))
	if err != nil {
		return usagef("--source: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	partitions := int32(kafkaCreatePartitions)
	if err := createTopic(ctx, adm, topic, partitions, stdout); err != nil {
		return err
	}
	// The DLT has the origin's partition count, as Spring's recoverer
	// expects, whichever made the origin.
	md, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	if d, ok := md[topic]; ok && d.Err == nil {
		partitions = int32(len(d.Partitions))
	}
	return createTopic(ctx, adm, dlq, partitions, stdout)
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, stdout io.Writer) error {
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		fmt.Fprintf(stdout, "topic %s exists\n", topic)
		return nil
	case err != nil:
		return fmt.Errorf("kafka: create %s: %w", topic, err)
	}
	fmt.Fprintf(stdout, "created topic %s (%d partitions)\n", topic, partitions)
	return nil
}

func createSQS(ctx context.Context, raw, dlq string, maxReceive int, stdout io.Writer) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return usagef("--source %q: want sqs://QUEUE?region=R[&endpoint=URL]", raw)
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
