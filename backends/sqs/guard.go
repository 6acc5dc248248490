package sqsdlq

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// GuardDestination refuses the DLQ itself as a redrive destination, by
// name, queue URL or ARN: a redrive into the DLQ would delete each message
// after sending a copy of it back to where it is. The lease lives in a tag
// of the DLQ, so there is no other bookkeeping queue to guard.
func (q *Queue) GuardDestination(_ context.Context, dest string) error {
	if dest == "" {
		return nil
	}
	account, name := queueRef(dest)
	if name == "" {
		return nil // not a queue reference; resolving it fails later with its own error
	}
	selfName := q.src.queue
	if n := SQSQueueName(q.arn); n != "" {
		selfName = n
	}
	selfAccount := arnAccount(q.arn)
	if name != selfName {
		return nil
	}
	if account != "" && selfAccount != "" && account != selfAccount {
		return nil
	}
	return fmt.Errorf("%q is this DLQ (%s): a redrive never sends to the DLQ it reads", dest, q)
}

// queueRef splits a destination given as a queue name, URL or ARN into its
// account (empty when the reference does not say) and queue name.
func queueRef(dest string) (account, name string) {
	switch {
	case strings.HasPrefix(dest, "https://") || strings.HasPrefix(dest, "http://"):
		u, err := url.Parse(dest)
		if err != nil {
			return "", ""
		}
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if len(parts) == 0 || parts[len(parts)-1] == "" {
			return "", ""
		}
		name = parts[len(parts)-1]
		if len(parts) >= 2 {
			account = parts[len(parts)-2]
		}
		return account, name
	case strings.HasPrefix(dest, "arn:"):
		return arnAccount(dest), SQSQueueName(dest)
	}
	return "", dest
}
