package sqstest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestServerKeepsMessagesOverRestart: the server answers, and a restart
// keeps the queue, its URL and its messages (what the restart tests need).
func TestServerKeepsMessagesOverRestart(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.Client()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("restart-me")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("kept")}); err != nil {
		t.Fatal(err)
	}
	before := s.Endpoint()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Endpoint() != before {
		t.Fatalf("endpoint changed over restart: %s -> %s", before, s.Endpoint())
	}
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 2})
	if err != nil {
		t.Fatalf("receive after restart: %v\n%s", err, s.LogTail(20))
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "kept" {
		t.Fatalf("after restart got %d messages, want the one sent before", len(out.Messages))
	}
}

// TestKillThenUp: the shared lifecycle's SIGKILL ends the server (its
// endpoint refuses, no PID is left recorded) and Up brings it back on the
// same endpoint.
func TestKillThenUp(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.Client()
	if _, err := c.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatal(err)
	}
	before, pid := s.Endpoint(), s.PID()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.PID() != 0 {
		t.Errorf("PID %d still recorded after Kill (was %d)", s.PID(), pid)
	}
	if _, err := c.ListQueues(ctx, &sqs.ListQueuesInput{}); err == nil {
		t.Fatal("the endpoint still answers after Kill")
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if s.Endpoint() != before || s.PID() == 0 || s.PID() == pid {
		t.Fatalf("after Up: endpoint %s (was %s), pid %d (was %d)", s.Endpoint(), before, s.PID(), pid)
	}
	if _, err := c.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("after Up: %v\n%s", err, s.LogTail(20))
	}
}
