package sqsdlq

import (
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// TestEnqueued: an answer without a MessageId, or (FIFO) with the
// MessageId SQS gave another move of this process, shows nothing was
// enqueued; the same move's resend answered with its own earlier
// MessageId is fine.
func TestEnqueued(t *testing.T) {
	q := &Queue{sentIDs: map[string]string{}}
	const dest = "http://sqs/q.fifo"
	a := types.SendMessageBatchRequestEntry{MessageDeduplicationId: aws.String(dedupID("run", "m1"))}
	b := types.SendMessageBatchRequestEntry{MessageDeduplicationId: aws.String(dedupID("run", "m2"))}
	if err := q.enqueued(dest, a, ""); err == nil {
		t.Fatal("an answer without a MessageId passed")
	}
	if err := q.enqueued(dest, a, "X"); err != nil {
		t.Fatal(err)
	}
	if err := q.enqueued(dest, a, "X"); err != nil {
		t.Fatalf("the same move's resend: %v", err)
	}
	if err := q.enqueued(dest, b, "X"); err == nil {
		t.Fatal("another move answered with the first move's MessageId passed")
	}
	if dedupID("run", "m1") == dedupID("other-run", "m1") {
		t.Fatal("two runs share a deduplication ID")
	}
	std := types.SendMessageBatchRequestEntry{}
	if err := q.enqueued("http://sqs/q", std, "X"); err != nil {
		t.Fatalf("standard queue: %v", err)
	}
}

// TestNotEnqueued: a move's send is retried by the SDK only when the
// server cannot have enqueued it — no connection was made, or the server
// refused it as throttled — never after a connection lost mid-call or a
// server error, whose request may have been enqueued.
func TestNotEnqueued(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"no connection", &url.Error{Op: "Post", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, true},
		{"throttled", &smithy.GenericAPIError{Code: "RequestThrottled"}, true},
		{"throttled, ElasticMQ's form", &smithy.GenericAPIError{Code: "com.amazonaws.sqs#ThrottlingException"}, true},
		{"connection reset", &url.Error{Op: "Post", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}, false},
		{"answer lost", io.ErrUnexpectedEOF, false},
		{"server error", &smithy.GenericAPIError{Code: "InternalError"}, false},
	} {
		if got := notEnqueued(tc.err) == aws.TrueTernary; got != tc.retry {
			t.Errorf("%s: retried %v, want %v", tc.name, got, tc.retry)
		}
	}
}
