package sqsdlq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backend"
)

// What reading costs. SQS can be read only by receiving, and every receive
// raises the message's ApproximateReceiveCount by one. That costs nothing
// unless the DLQ has a redrive policy of its own (a DLQ whose DLQ is
// another queue): SQS then moves a message on at the receive after its
// maxReceiveCount-th. And the count comes back only with the receive that
// raised it: a receive cannot look first.
//
// So dlqctl keeps every message at least one receive short of that limit:
// a receive pass (a scan, show, each receive of a redrive) is made only
// when, as far as dlqctl knows, the highest receive count in the DLQ plus
// one stays below maxReceiveCount. What it knows: the tag ReadsTag on the
// DLQ, where each pass records — before it receives anything — the count
// it will leave at most, and afterwards the highest count it saw; what
// this process saw; and the maxReceiveCount of the queues that
// dead-letter into the DLQ, since a dead letter may arrive with its count
// (ElasticMQ keeps it). A pass that receives a message already at the
// limit (read by something else, or the tag lost) stops there and
// releases what it took, so that it leaves no other message there.

// ReadsTag is the tag key on a DLQ with a redrive policy of its own that
// holds the highest receive count dlqctl's receives left on its messages.
const ReadsTag = "dlqctl-reads"

// readGuard accounts for one receive pass against the DLQ's own limit.
// The nil readGuard (no limit) lets every pass through.
type readGuard struct {
	q     *Queue
	limit int
	prior int    // the highest count before the pass, as far as dlqctl knows
	ahead string // the tag's value the pass wrote before it received

	mu   sync.Mutex
	seen int  // the highest count the pass received
	edge bool // a message came back at the limit
	// blind: a receive call of the pass failed or was made again by the
	// SDK, so messages may have been handed out (their counts raised)
	// in an answer that never arrived.
	blind bool
}

// guardRead is called before a receive pass: it refuses one that could
// leave a message at its limit (a *backend.ConfigError saying what
// reading costs), and records what the pass will leave at most before it
// starts.
func (q *Queue) guardRead(ctx context.Context, what string) (*readGuard, error) {
	if q.own.MaxReceiveCount <= 0 {
		return nil, nil
	}
	prior, _, err := q.readsSoFar(ctx)
	if err != nil {
		return nil, err
	}
	g := &readGuard{q: q, limit: q.own.MaxReceiveCount, prior: prior}
	if left := g.left(); left <= 0 {
		return nil, q.costRefusal(what, prior)
	}
	// Written ahead: a pass killed half-way has raised counts all the same.
	if g.ahead, err = q.writeReads(ctx, prior+1); err != nil {
		return nil, err
	}
	return g, nil
}

// left is how many more receive passes keep every message one receive
// short of the limit: counts up to limit-2 may be received once more.
func (g *readGuard) left() int { return readsLeft(g.limit, g.prior) }

func readsLeft(limit, prior int) int { return max(limit-1-prior, 0) }

// note takes the counts of msgs, just received; it says whether one is at
// the limit, which stops the pass.
func (g *readGuard) note(msgs []types.Message) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range msgs {
		n, _ := strconv.Atoi(m.Attributes[SQSReceiveCount])
		g.seen = max(g.seen, n)
		if n >= g.limit {
			g.edge = true
		}
	}
	return g.edge
}

// unanswered notes a receive call whose answer may be lost: what it
// handed out was received without dlqctl seeing the counts.
func (g *readGuard) unanswered() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.blind = true
	g.mu.Unlock()
}

// done records what the pass left: the highest count it saw when it saw
// the whole DLQ (whole), else the higher of that and what was known
// before — or, when a receive's answer may have been lost, the count
// written ahead, since a message handed out in that answer has been
// received once more, unseen. A tag rewritten since the pass wrote it
// ahead means another process read at the same time (and may have
// received a message after this pass gave it back): what it wrote is
// kept when higher. It returns the refusal when the pass stopped at a
// message at the limit.
func (g *readGuard) done(ctx context.Context, what string, whole bool) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	left, blind := g.seen, g.blind
	g.mu.Unlock()
	switch {
	case blind && !whole:
		left = max(left, g.prior+1)
	case !whole || g.edge:
		left = max(left, g.prior)
	}
	// Failing to read the tag, the pass leaves what it wrote ahead.
	raw, err := g.q.readTag(ctx)
	if err == nil {
		if raw != g.ahead {
			left = max(left, parseReads(raw))
		}
		_, err = g.q.writeReads(ctx, left)
	}
	g.q.mu.Lock()
	g.q.reads = left
	g.q.mu.Unlock()
	if g.edge {
		return g.q.edgeRefusal(what, g.seen)
	}
	return err
}

// readsSoFar is the highest receive count a message of the DLQ may have
// before the next pass, as far as dlqctl knows: its tag, what this process
// saw, and what a dead letter arrives with; and when the tag was written.
func (q *Queue) readsSoFar(ctx context.Context) (int, time.Time, error) {
	recorded, at, err := q.readReads(ctx)
	if err != nil {
		return 0, at, err
	}
	arrival, err := q.arrivalCount(ctx)
	if err != nil {
		return 0, at, err
	}
	q.mu.Lock()
	mine := q.reads
	q.mu.Unlock()
	return max(recorded, arrival, mine), at, nil
}

// arrivalCount is the highest maxReceiveCount of the queues that
// dead-letter into the DLQ (read once): a message SQS dead-letters has
// been received that many times, and ElasticMQ keeps the count in the DLQ.
func (q *Queue) arrivalCount(ctx context.Context) (int, error) {
	q.mu.Lock()
	n, ok := q.arrival, q.arrivalKnown
	q.mu.Unlock()
	if ok {
		return n, nil
	}
	sources, err := q.sources(ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range sources {
		n = max(n, s.RedrivePolicy.MaxReceiveCount)
	}
	q.mu.Lock()
	q.arrival, q.arrivalKnown = n, true
	q.mu.Unlock()
	return n, nil
}

// readReads reads ReadsTag: the count and when it was written; 0 when
// there is none.
func (q *Queue) readReads(ctx context.Context) (int, time.Time, error) {
	raw, err := q.readTag(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	_, at, _ := strings.Cut(raw, "|")
	when, _ := time.Parse(time.RFC3339, at)
	return parseReads(raw), when, nil
}

// readTag is ReadsTag's raw value, COUNT|TIME ("" when there is none).
func (q *Queue) readTag(ctx context.Context) (string, error) {
	out, err := q.c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(q.url)})
	if err != nil {
		return "", q.wrap(ctx, "read the "+ReadsTag+" tag (what reading this DLQ has cost so far)", err)
	}
	return out.Tags[ReadsTag], nil
}

// parseReads is the count of a ReadsTag value; 0 when there is none.
func parseReads(raw string) int {
	count, _, _ := strings.Cut(raw, "|")
	n, _ := strconv.Atoi(count)
	return max(n, 0)
}

// writeReads records n in ReadsTag and returns the value written.
func (q *Queue) writeReads(ctx context.Context, n int) (string, error) {
	v := strconv.Itoa(n) + "|" + q.now().UTC().Format(time.RFC3339)
	if _, err := q.c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(q.url), Tags: map[string]string{ReadsTag: v}}); err != nil {
		return "", q.wrap(ctx, "record what reading this DLQ costs (the "+ReadsTag+" tag; TagQueue is needed to read a DLQ with a redrive policy of its own)", err)
	}
	return v, nil
}

// readCostError is a receive pass refused for what it would cost.
type readCostError struct{ msg string }

func (e *readCostError) Error() string { return e.msg }

// costRefusal says why dlqctl does not receive from the DLQ: what, a
// pass, would take a message to its limit (highest: the count it may
// have). It is a configuration error: the DLQ's own policy stands in the
// way.
func (q *Queue) costRefusal(what string, highest int) error {
	return q.refusal(fmt.Sprintf("%s refused", what),
		fmt.Sprintf("a message here may have been received %d times, so one more pass could leave it where the next receive moves it on", highest))
}

// edgeRefusal says why a pass stopped: it received a message at the
// limit (highest), which dlqctl's record did not foresee.
func (q *Queue) edgeRefusal(what string, highest int) error {
	return q.refusal(fmt.Sprintf("%s stopped", what),
		fmt.Sprintf("it received a message that had been received %d times, more than dlqctl's record said (something else receives from this DLQ, or the %s tag was removed); "+
			"it gave back everything it took at once", highest, ReadsTag))
}

func (q *Queue) refusal(head, why string) error {
	return &backend.ConfigError{Err: &readCostError{msg: fmt.Sprintf("%s: %s: this DLQ has a redrive policy of its own (maxReceiveCount %d, to %s): "+
		"SQS can be read only by receiving, each receive raises a message's receive count, and SQS moves a message on at the receive after its %s; "+
		"%s, and dlqctl keeps every message one receive short of that: it does not receive from this DLQ again. "+
		"Remove the DLQ's redrive policy (or raise its maxReceiveCount) to read or redrive it (docs/sqs.md)",
		q, head, q.own.MaxReceiveCount, arnQueue(q.own.DeadLetterTargetArn), ordinal(q.own.MaxReceiveCount), why)}}
}

// ReadCost is what reading the DLQ costs, for stats and doctor: its own
// redrive policy (nil: none, and reading costs nothing that matters), the
// highest receive count dlqctl knows a message to have, and how many more
// receive passes it makes before it refuses.
type ReadCost struct {
	Policy    *RedrivePolicy
	Highest   int
	ReadsLeft int
	// RecordedAt is when the tag was last written (zero: never).
	RecordedAt time.Time
}

// Cost reads what reading the DLQ costs, without receiving anything.
func (q *Queue) Cost(ctx context.Context) (ReadCost, error) {
	if q.own.MaxReceiveCount <= 0 {
		return ReadCost{}, nil
	}
	prior, at, err := q.readsSoFar(ctx)
	if err != nil {
		return ReadCost{}, err
	}
	pol := q.own
	return ReadCost{Policy: &pol, Highest: prior, ReadsLeft: readsLeft(pol.MaxReceiveCount, prior), RecordedAt: at}, nil
}

// costNote is what reading a DLQ with a limit costs, in words.
func (q *Queue) costNote(c ReadCost) string {
	recorded := "no read recorded yet"
	if !c.RecordedAt.IsZero() {
		recorded = "last read recorded in the " + ReadsTag + " tag at " + c.RecordedAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("this DLQ has a redrive policy of its own (maxReceiveCount %d, to %s): each read by dlqctl (a scan; show; each chunk and "+
		"each reconciliation poll of a redrive) receives every message once, and SQS moves a message on at the receive after its %s; "+
		"the most-received message has been received %d times as far as dlqctl knows (%s): %d more reads before dlqctl refuses, "+
		"keeping one receive in hand so that no single receive moves a message on",
		c.Policy.MaxReceiveCount, arnQueue(c.Policy.DeadLetterTargetArn), ordinal(c.Policy.MaxReceiveCount), c.Highest, recorded, c.ReadsLeft)
}

// DoctorChecks gives doctor its line on what reading the DLQ costs
// (backend.DoctorChecker).
func (q *Queue) DoctorChecks(ctx context.Context) []backend.DoctorCheck {
	if q.missing {
		return nil
	}
	c, err := q.Cost(ctx)
	switch {
	case err != nil:
		return []backend.DoctorCheck{{Name: "dlq reads", Detail: err.Error(), Fix: "check the credentials' sqs:ListQueueTags and sqs:ListDeadLetterSourceQueues"}}
	case c.Policy == nil:
		return []backend.DoctorCheck{{Name: "dlq reads", OK: true, Detail: "no redrive policy of its own: each read raises every message's receive count, which nothing acts on"}}
	case c.ReadsLeft == 0:
		return []backend.DoctorCheck{{Name: "dlq reads", Detail: q.costNote(c),
			Fix: fmt.Sprintf("remove the redrive policy of %s (or raise its maxReceiveCount): a DLQ of a DLQ moves what dlqctl reads", q.src.queue)}}
	}
	return []backend.DoctorCheck{{Name: "dlq reads", OK: true, Detail: q.costNote(c) + "; a DLQ without a redrive policy of its own costs nothing to read"}}
}

// arnQueue is the queue an ARN names, or the ARN.
func arnQueue(arn string) string {
	if n := SQSQueueName(arn); n != "" {
		return n
	}
	return arn
}

// ordinal writes n as "1st", "2nd", "3rd", "4th", "11th", ….
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
