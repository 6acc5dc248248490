package sqsdlq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
	"github.com/dlqctl/dlqctl/conformance"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(sqsdlq.Registration())

// TestConformance runs the shared conformance suite on SQS (ElasticMQ), against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		srv := sqstest.Start(t)
		for _, kv := range sqstest.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		c := srv.Client()
		url := func(queue string) string {
			return "sqs://" + queue + "?region=" + sqstest.Region + "&endpoint=" + srv.Endpoint()
		}
		n := 0
		return &conformance.Target{Down: srv.Down, Up: srv.Up, Unordered: true, Refuse: func(*testing.T, conformance.Fixture, string, string) {
			// Nothing to do: the destination queue was never created,
			// and SQS refuses a send to a queue that does not exist.
		}, Missing: func(t *testing.T) string {
			return url(fmt.Sprintf("conf-typo-%d", time.Now().UnixNano()))
		}, Fresh: func(t *testing.T) conformance.Fixture {
			n++
			base := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
			ctx := context.Background()
			dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(base + "-dlq")})
			if err != nil {
				t.Fatal(err)
			}
			attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
				AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
			if err != nil {
				t.Fatal(err)
			}
			// The origin dead-letters into the DLQ after two receives, as
			// production's redrive policy does; visibility 0 gives a
			// failed message back at once.
			policy := fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":"2"}`, attrs.Attributes["QueueArn"])
			if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(base + "-orders"),
				Attributes: map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": policy}}); err != nil {
				t.Fatal(err)
			}
			return conformance.Fixture{Source: url(base + "-dlq"), Origin: base + "-orders", Self: base + "-dlq",
				Alias:   strings.Replace(url(base+"-dlq"), "127.0.0.1:", "localhost:", 1),
				Consume: []string{"--source", url(base + "-orders")}}
		}}
	})
}
