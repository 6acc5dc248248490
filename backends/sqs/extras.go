package sqsdlq

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backend"
)

// RedrivePolicy is a source queue's RedrivePolicy attribute.
type RedrivePolicy struct {
	DeadLetterTargetArn string `json:"dead_letter_target_arn"`
	MaxReceiveCount     int    `json:"max_receive_count"`
}

// SourceQueue is a queue whose redrive policy names this DLQ.
type SourceQueue struct {
	URL           string        `json:"url"`
	Name          string        `json:"name"`
	RedrivePolicy RedrivePolicy `json:"redrive_policy"`
}

// SQSExtras is the SQS section of `stats` (dlqctl.stats/v1 backend).
type SQSExtras struct {
	Queue string `json:"queue"`
	URL   string `json:"url"`
	ARN   string `json:"arn"`
	FIFO  bool   `json:"fifo"`
	// Approximate counts as SQS reports them.
	Counts
	// RetentionSeconds is the DLQ's MessageRetentionPeriod, 0 when the
	// server reports none (ElasticMQ keeps messages forever).
	RetentionSeconds int64 `json:"retention_seconds"`
	// OldestExpiresAt is when SQS deletes the oldest message seen by the
	// last scan: its SentTimestamp plus the DLQ's retention period (SQS
	// counts a dead letter's age from its first send).
	OldestExpiresAt string        `json:"oldest_expires_at,omitempty"`
	Sources         []SourceQueue `json:"sources"`
	// NotSeen is how many messages the scan could not see and so are not
	// in the entry counts: its shortfall from the count it began with
	// (messages in flight: another reader's, a killed scan's or move's,
	// those of a receive whose answer was lost and that did not come back
	// while the scan waited for them; in a FIFO queue, messages behind
	// others of their group).
	NotSeen  int64    `json:"not_seen"`
	Warnings []string `json:"warnings,omitempty"`
}

// Extras reports the approximate visible, in-flight and delayed counts,
// the retention period and when the oldest message expires (with a warning
// inside a day), and the source queues whose redrive policies name this
// DLQ, with their maxReceiveCount.
func (q *Queue) Extras(ctx context.Context, _ []string) (backend.ExtraStats, error) {
	c, attrs, err := q.counts(ctx)
	if err != nil {
		return backend.ExtraStats{}, err
	}
	x := SQSExtras{Queue: q.src.queue, URL: q.url, ARN: q.arn, FIFO: q.fifo, Counts: c, Sources: []SourceQueue{}}
	if s, err := strconv.ParseInt(attrs[string(types.QueueAttributeNameMessageRetentionPeriod)], 10, 64); err == nil {
		x.RetentionSeconds = s
	}
	q.mu.Lock()
	oldest := q.oldestSent
	q.mu.Unlock()
	x.OldestExpiresAt, x.Warnings = expiry(oldest, time.Duration(x.RetentionSeconds)*time.Second, q.now())
	if x.NotSeen = q.Unseen(); x.NotSeen > 0 {
		x.Warnings = append(x.Warnings, fmt.Sprintf("%d messages were in flight and not seen by this scan, so they are missing from the counts above: "+
			"another reader holds them, a dlqctl scan or move was killed before it let them go (then they are visible again within %s, or twice the killed scan's age), "+
			"or a receive's answer was lost on the way and they did not come back while the scan waited (in a FIFO queue, they may also be waiting behind others of their group)",
			x.NotSeen, q.scanVis))
	}
	sources, err := q.sources(ctx)
	if err != nil {
		x.Warnings = append(x.Warnings, "source queues: "+err.Error())
	}
	x.Sources = append(x.Sources, sources...)
	rows := [][2]string{
		{"queue", x.Queue + fifoNote(x.FIFO)},
		{"messages", fmt.Sprintf("%d visible, %d in flight, %d delayed (approximate)", c.Visible, c.InFlight, c.Delayed)},
	}
	if x.RetentionSeconds > 0 {
		rows = append(rows, [2]string{"retention", (time.Duration(x.RetentionSeconds) * time.Second).String()})
	} else {
		rows = append(rows, [2]string{"retention", "not reported by the server"})
	}
	if x.OldestExpiresAt != "" {
		rows = append(rows, [2]string{"oldest expires", x.OldestExpiresAt})
	}
	for _, s := range x.Sources {
		rows = append(rows, [2]string{"source queue", fmt.Sprintf("%s (maxReceiveCount %d)", s.Name, s.RedrivePolicy.MaxReceiveCount)})
	}
	for _, w := range x.Warnings {
		rows = append(rows, [2]string{"warning", w})
	}
	return backend.ExtraStats{JSON: x, Title: "SQS dead-letter queue", Rows: rows}, nil
}

// expiry is when SQS deletes the oldest message (sent at oldest, kept for
// retention) and a warning when that is within a day of now. Nothing is
// known without both.
func expiry(oldest time.Time, retention time.Duration, now time.Time) (string, []string) {
	if oldest.IsZero() || retention <= 0 {
		return "", nil
	}
	exp := oldest.Add(retention).UTC()
	at := exp.Format(time.RFC3339)
	if left := exp.Sub(now); left < 24*time.Hour {
		if left < 0 {
			left = 0
		}
		return at, []string{fmt.Sprintf("the oldest message expires in %s (at %s): SQS deletes it then, redriven or not", left.Round(time.Minute), at)}
	}
	return at, nil
}

func fifoNote(fifo bool) string {
	if fifo {
		return " (FIFO)"
	}
	return ""
}

// sources lists the queues whose redrive policy names this DLQ.
func (q *Queue) sources(ctx context.Context) ([]SourceQueue, error) {
	var out []SourceQueue
	p := sqs.NewListDeadLetterSourceQueuesPaginator(q.c, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(q.url)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return out, q.wrap(ctx, "list the source queues", err)
		}
		for _, u := range page.QueueUrls {
			pol, _, err := q.policyAt(ctx, u)
			if err != nil {
				return out, err
			}
			out = append(out, SourceQueue{URL: u, Name: lastSegment(u), RedrivePolicy: pol})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func lastSegment(u string) string {
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] == '/' {
			return u[i+1:]
		}
	}
	return u
}

// redrivePolicy reads the redrive policy of the queue with this ARN.
func (q *Queue) redrivePolicy(ctx context.Context, arn string) (RedrivePolicy, error) {
	name := SQSQueueName(arn)
	if name == "" {
		return RedrivePolicy{}, fmt.Errorf("%q is not an SQS queue ARN", arn)
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(name)}
	if acct := arnAccount(arn); acct != "" && acct != arnAccount(q.arn) {
		in.QueueOwnerAWSAccountId = aws.String(acct)
	}
	out, err := q.c.GetQueueUrl(ctx, in)
	if err != nil {
		return RedrivePolicy{}, q.wrap(ctx, "find the source queue "+name, err)
	}
	pol, _, err := q.policyAt(ctx, aws.ToString(out.QueueUrl))
	return pol, err
}

func (q *Queue) policyAt(ctx context.Context, queueURL string) (RedrivePolicy, bool, error) {
	out, err := q.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return RedrivePolicy{}, false, q.wrap(ctx, "read the redrive policy of "+queueURL, err)
	}
	raw := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if raw == "" {
		return RedrivePolicy{}, false, nil
	}
	// maxReceiveCount comes as a number or as a string, depending on who
	// wrote the policy.
	var p struct {
		Target string          `json:"deadLetterTargetArn"`
		Max    json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return RedrivePolicy{}, false, fmt.Errorf("%s: the redrive policy of %s is not JSON: %v", q, queueURL, err)
	}
	var n int
	if err := json.Unmarshal(p.Max, &n); err != nil {
		var s string
		if json.Unmarshal(p.Max, &s) == nil {
			n, _ = strconv.Atoi(s)
		}
	}
	return RedrivePolicy{DeadLetterTargetArn: p.Target, MaxReceiveCount: n}, true, nil
}
