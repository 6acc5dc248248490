package sqsdlq_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
)

// leaseKeptBy says why a stopped run keeps its lease (paused-holder): in
// the holder's PID space a live PID keeps the tag until it expires (2
// minutes).
const leaseKeptBy = "a live holder on this host keeps its lease tag until the tag expires (2 minutes)"

// killedScanVisibility is the scans' visibility timeout in the
// killed-scan case: long enough for a scan of its 60 messages to extend
// it (every twelfth of it) on a loaded machine, short enough that the case
// does not wait out the default 30 s for what the killed scans hid.
const killedScanVisibility = "6s"

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(testRegistration())

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
		ctx := context.Background()
		create := func(t *testing.T, name string, attrs map[string]string) string {
			out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
			if err != nil {
				t.Fatal(err)
			}
			return aws.ToString(out.QueueUrl)
		}
		arnOf := func(t *testing.T, queueURL string) string {
			attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
				AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
			if err != nil {
				t.Fatal(err)
			}
			return attrs.Attributes["QueueArn"]
		}
		// pair makes a DLQ with dlqAttrs and its origin, which
		// dead-letters into it after two receives, as production's
		// redrive policy does; visibility 0 gives a failed message back
		// at once. suffix is ".fifo" for FIFO queues.
		pair := func(t *testing.T, dlqAttrs map[string]string, suffix string) conformance.Fixture {
			n++
			base := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
			dlq := create(t, base+"-dlq"+suffix, dlqAttrs)
			policy := fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":"2"}`, arnOf(t, dlq))
			oattrs := map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": policy}
			if suffix != "" {
				oattrs["FifoQueue"] = "true"
			}
			create(t, base+"-orders"+suffix, oattrs)
			return conformance.Fixture{Source: url(base + "-dlq" + suffix), Origin: base + "-orders" + suffix, Self: base + "-dlq" + suffix,
				Alias:   strings.Replace(url(base+"-dlq"+suffix), "127.0.0.1:", "localhost:", 1),
				Consume: []string{"--source", url(base + "-orders" + suffix)}}
		}
		queueURL := func(t *testing.T, name string) string {
			out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			return aws.ToString(out.QueueUrl)
		}
		// count is a queue's messages: visible, in flight and delayed.
		count := func(t *testing.T, name string) int {
			attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL(t, name)),
				AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
					types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
			if err != nil {
				t.Fatal(err)
			}
			held := 0
			for _, v := range attrs.Attributes {
				n, _ := strconv.Atoi(v)
				held += n
			}
			return held
		}
		return &conformance.Target{Down: srv.Down, Up: srv.Up, Unordered: true, HolderKeepsLease: leaseKeptBy, Refuse: func(*testing.T, conformance.Fixture, string, string) {
			// Nothing to do: the destination queue was never created,
			// and SQS refuses a send to a queue that does not exist.
		}, Missing: func(t *testing.T) string {
			return url(fmt.Sprintf("conf-typo-%d", time.Now().UnixNano()))
		}, Fresh: func(t *testing.T) conformance.Fixture {
			if strings.HasSuffix(t.Name(), "/killed-scan") {
				// The case waits for what its killed scans hid: a
				// scan visibility of a few seconds, not 30.
				t.Setenv(scanVisibilityEnv, killedScanVisibility)
			}
			return pair(t, nil, "")
		},
			// A SIGKILL of the JVM, then the script's stop (it finds
			// nothing running and clears its files) before Up.
			Kill: srv.Kill,
			PID:  srv.PID,
			Held: func(t *testing.T, fx conformance.Fixture) int {
				return count(t, fx.Self)
			},
			Published: func(t *testing.T, fx conformance.Fixture) int {
				return count(t, fx.Origin)
			},
			Recreate: func(t *testing.T, fx conformance.Fixture) {
				u := queueURL(t, fx.Self)
				attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u),
					AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameFifoQueue}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
					t.Fatal(err)
				}
				create(t, fx.Self, attrs.Attributes)
			},
			// FIFO queues: the origin drops a send whose deduplication ID
			// it saw in the last five minutes.
			Deduplicating: func(t *testing.T) conformance.Fixture {
				return pair(t, map[string]string{"FifoQueue": "true"}, ".fifo")
			},
			Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
				return snapshot(t, c, queueURL(t, fx.Self))
			},
			// A DLQ with its own redrive policy at the lowest
			// maxReceiveCount SQS takes: a second receive moves a message
			// on to the DLQ's DLQ.
			Limited: func(t *testing.T) conformance.Fixture {
				n++
				last := create(t, fmt.Sprintf("conf-%d-%d-dlq-dlq", time.Now().UnixNano(), n), nil)
				policy := fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":"1"}`, arnOf(t, last))
				return pair(t, map[string]string{"RedrivePolicy": policy}, "")
			},
			Native: func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
				// As a producer sends a dead letter: the same body and
				// attributes each time; SQS gives each its MessageId.
				str := func(v string) types.MessageAttributeValue {
					return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
				}
				in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL(t, fx.Self)), MessageBody: aws.String(string(e.Payload)),
					MessageAttributes: map[string]types.MessageAttributeValue{
						"event_id": str(e.EventID), "fingerprint": str(e.Fingerprint), "content_type": str(e.ContentType),
						"key": str(e.Key), "origin_stream": str(e.Origin.Topic), "last_error": str(e.LastError),
						"attempts": str(strconv.Itoa(e.Attempts)), "dead_lettered_at": str(e.DeadLetteredAt.Format(time.RFC3339)),
					}}
				for range copies {
					if _, err := c.SendMessage(ctx, in); err != nil {
						t.Fatal(err)
					}
				}
			},
			ReadCost: "every receive raises ApproximateReceiveCount, and SQS has no other read",
			NotApplicable: map[string]string{
				"two-pointers":            "an entry is the message itself, moved by SQS",
				"forged-record":           "no record of removals: a move deletes the message",
				"bookkeeping-destination": "nothing of dlqctl's is a destination: its lease is a tag on the DLQ",
			},
		}
	})
}

// snapshot receives every message of the queue (SQS has no other read:
// it raises each one's receive count), lists them by send time and event
// ID with their receive counts, bodies and attributes, and makes them
// visible again.
func snapshot(t *testing.T, c *sqs.Client, queueURL string) []string {
	ctx := context.Background()
	type held struct {
		sent  int64
		line  string
		event string
	}
	var msgs []held
	var handles []string
	for empty := 0; empty < 2; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10,
			VisibilityTimeout: 30, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			attrs := map[string]string{}
			for k, v := range m.MessageAttributes {
				attrs[k] = aws.ToString(v.StringValue)
			}
			sent, _ := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
			ev := aws.ToString(m.MessageAttributes["event_id"].StringValue)
			msgs = append(msgs, held{sent: sent, event: ev, line: fmt.Sprintf("deliveries=%s%s %s",
				m.Attributes["ApproximateReceiveCount"], conformance.Fields(attrs), aws.ToString(m.Body))})
		}
	}
	for _, h := range handles {
		if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL),
			ReceiptHandle: aws.String(h), VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
	}
	sort.SliceStable(msgs, func(i, j int) bool {
		if msgs[i].sent != msgs[j].sent {
			return msgs[i].sent < msgs[j].sent
		}
		return msgs[i].event < msgs[j].event
	})
	lines := make([]string, len(msgs))
	for i, m := range msgs {
		lines[i] = m.line
	}
	return lines
}
