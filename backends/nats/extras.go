package natsdlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
)

var _ backend.Extras = (*Stream)(nil)

// NATSExtras is the NATS section of `stats` (dlqctl.stats/v1 backend).
type NATSExtras struct {
	Stream     string `json:"stream"`
	Advisories bool   `json:"advisories"`
	Messages   uint64 `json:"messages"`
	Bytes      uint64 `json:"bytes"`
	FirstSeq   uint64 `json:"first_seq"`
	LastSeq    uint64 `json:"last_seq"`
	FirstTime  string `json:"first_time,omitempty"`
	Deleted    int    `json:"deleted"`
	// MaxAgeSeconds is the stream's MaxAge: dead letters older than it are
	// removed by the server (0: kept until removed).
	MaxAgeSeconds int64 `json:"max_age_seconds"`
	// Consumer is, for an advisory stream, the consumer whose dead letters
	// it captures.
	Consumer *ConsumerState `json:"consumer,omitempty"`
	Warnings []string       `json:"warnings,omitempty"`
}

// ConsumerState is what the server says about the consumer an advisory
// stream captures.
type ConsumerState struct {
	Stream         string `json:"stream"`
	Name           string `json:"name"`
	MaxDeliver     int    `json:"max_deliver"`
	NumPending     uint64 `json:"num_pending"`
	NumAckPending  int    `json:"num_ack_pending"`
	NumRedelivered int    `json:"num_redelivered"`
	NumWaiting     int    `json:"num_waiting"`
	// Stalled is set when nobody pulls and delivered messages wait for a
	// pull: those that reached MaxDeliver have no advisory yet.
	Stalled *Stalled `json:"stalled,omitempty"`
}

// Stalled describes a consumer's ack-pending messages that wait for a
// pull (no pull request waits, and the last delivery is older than the
// ack wait). A message naked at its last delivery stays in the
// redelivery queue, and the server emits its MAX_DELIVERIES advisory only
// when the consumer pulls again; until then it is no entry. The server
// does not tell a message's delivery count without delivering it, so
// Sequences are the stream sequences of the ack-pending window (above the
// ack floor, up to the last delivered) still in the stream: exactly the
// ack-pending messages when Exact, else a superset (messages acked above
// the floor stay in a limits stream).
type Stalled struct {
	AckPending   int      `json:"ack_pending"`
	Sequences    []uint64 `json:"sequences"`
	Exact        bool     `json:"exact"`
	Truncated    bool     `json:"truncated,omitempty"`
	LastDelivery string   `json:"last_delivery,omitempty"`
}

// stalledLimit caps the stream sequences read and listed for a stalled
// consumer: one direct get each.
const stalledLimit = 100

// Extras reports the stream's state and limits and, for an advisory
// stream, the consumer's pending, ack-pending and redelivered counts.
func (s *Stream) Extras(ctx context.Context, _ []string) (backend.ExtraStats, error) {
	x := NATSExtras{Stream: s.src.stream, Advisories: s.src.advisories}
	if s.missing {
		x.Warnings = append(x.Warnings, "the stream does not exist")
		return s.extraStats(x), nil
	}
	in, err := s.info(ctx)
	if err != nil {
		return backend.ExtraStats{}, err
	}
	st := in.State
	x.Messages, x.Bytes, x.FirstSeq, x.LastSeq, x.Deleted = st.Msgs, st.Bytes, st.FirstSeq, st.LastSeq, st.NumDeleted
	if !st.FirstTime.IsZero() && st.Msgs > 0 {
		x.FirstTime = st.FirstTime.UTC().Format(time.RFC3339)
	}
	x.MaxAgeSeconds = int64(in.Config.MaxAge / time.Second)
	if in.Config.Retention != jetstream.LimitsPolicy {
		x.Warnings = append(x.Warnings, fmt.Sprintf("retention %s: acks remove dead letters; use limits retention", in.Config.Retention))
	}
	if lost := lostOnCrash(in.Config); lost != "" {
		x.Warnings = append(x.Warnings, lost)
	}
	if s.src.advisories {
		if stream, consumer, ok := capturedConsumer(in.Config.Subjects); ok {
			cs, err := s.consumerState(ctx, stream, consumer)
			if err != nil {
				x.Warnings = append(x.Warnings, err.Error())
			} else {
				x.Consumer = cs
				if cs.Stalled != nil {
					x.Warnings = append(x.Warnings, cs.stalledDetail())
				} else if cs.NumRedelivered > 0 {
					x.Warnings = append(x.Warnings, fmt.Sprintf("%d messages of %s/%s are being redelivered: one that reached max deliveries becomes an entry only when the consumer pulls again", cs.NumRedelivered, stream, consumer))
				}
			}
		}
	}
	return s.extraStats(x), nil
}

// capturedConsumer reads the stream and consumer from an advisory
// stream's subjects ($JS.EVENT.ADVISORY.CONSUMER.<KIND>.<STREAM>.<CONSUMER>).
func capturedConsumer(subjects []string) (string, string, bool) {
	for _, subj := range subjects {
		for _, prefix := range []string{subjMaxDeliveries + ".", subjTerminated + "."} {
			if rest, ok := strings.CutPrefix(subj, prefix); ok {
				stream, consumer, ok := strings.Cut(rest, ".")
				if ok && stream != "*" && consumer != "*" && consumer != ">" {
					return stream, consumer, true
				}
			}
		}
	}
	return "", "", false
}

func (s *Stream) consumerState(ctx context.Context, stream, consumer string) (*ConsumerState, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	c, err := s.js.Consumer(rctx, stream, consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("the consumer %s/%s does not exist", stream, consumer)
	}
	if err != nil {
		return nil, s.wrap("read the consumer "+stream+"/"+consumer, err)
	}
	in := c.CachedInfo()
	cs := &ConsumerState{Stream: stream, Name: consumer, MaxDeliver: in.Config.MaxDeliver, NumPending: in.NumPending,
		NumAckPending: in.NumAckPending, NumRedelivered: in.NumRedelivered, NumWaiting: in.NumWaiting}
	if stalledNow(in, time.Now()) {
		cs.Stalled, err = s.stalled(ctx, in)
		if err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// stalledNow: delivered messages are unacked, no pull request waits, and
// the last delivery is older than the ack wait, so every one of them
// waits for a pull, either to be redelivered or for its MAX_DELIVERIES
// advisory. A consumer that pulls now and then is not stalled while a
// pull waits.
func stalledNow(in *jetstream.ConsumerInfo, now time.Time) bool {
	if in.NumAckPending == 0 || in.NumWaiting > 0 || in.Config.MaxDeliver <= 0 || in.Delivered.Last == nil {
		return false
	}
	wait := in.Config.AckWait
	if wait <= 0 {
		wait = 30 * time.Second // the server's default
	}
	if n := len(in.Config.BackOff); n > 0 {
		wait = in.Config.BackOff[n-1]
	}
	return now.Sub(*in.Delivered.Last) > wait
}

// stalled lists the stream sequences of the consumer's ack-pending window
// that are still in its stream (see Stalled).
func (s *Stream) stalled(ctx context.Context, in *jetstream.ConsumerInfo) (*Stalled, error) {
	st := &Stalled{AckPending: in.NumAckPending, LastDelivery: in.Delivered.Last.UTC().Format(time.RFC3339)}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	origin, err := s.js.Stream(rctx, in.Stream)
	if err != nil {
		return nil, s.wrap("read the stream "+in.Stream, err)
	}
	for seq := in.AckFloor.Stream + 1; seq <= in.Delivered.Stream; seq++ {
		if seq-in.AckFloor.Stream > stalledLimit {
			st.Truncated = true
			break
		}
		gctx, cancel := s.reqCtx(ctx)
		_, err := origin.GetMsg(gctx, seq)
		cancel()
		switch {
		case err == nil:
			st.Sequences = append(st.Sequences, seq)
		case !isNoMessage(err):
			return nil, s.wrap(fmt.Sprintf("read message %d of %s", seq, in.Stream), err)
		}
	}
	st.Exact = !st.Truncated && len(st.Sequences) == in.NumAckPending
	return st, nil
}

// stalledDetail says what waits for a pull and what to do.
func (c *ConsumerState) stalledDetail() string {
	seqs := make([]string, len(c.Stalled.Sequences))
	for i, q := range c.Stalled.Sequences {
		seqs[i] = strconv.FormatUint(q, 10)
	}
	which := "at stream sequences " + strings.Join(seqs, ", ")
	if !c.Stalled.Exact {
		which = "among stream sequences " + strings.Join(seqs, ", ")
		if c.Stalled.Truncated {
			which += ", …"
		}
	}
	return fmt.Sprintf("%s/%s: %d delivered messages wait for a pull (none since %s, no pull request waiting), %s; "+
		"those that reached max deliveries (%d) have no MAX_DELIVERIES advisory and are no entries until the consumer pulls again",
		c.Stream, c.Name, c.Stalled.AckPending, c.Stalled.LastDelivery, which, c.MaxDeliver)
}

// stalledFix is what to do about a stalled consumer.
func stalledFix() string {
	return "start the consumer: at its next pull the server emits the MAX_DELIVERIES advisories (the messages become entries) and redelivers the messages that have deliveries left"
}

func (s *Stream) extraStats(x NATSExtras) backend.ExtraStats {
	rows := [][2]string{
		{"stream", x.Stream},
		{"messages", strconv.FormatUint(x.Messages, 10)},
		{"sequences", fmt.Sprintf("%d-%d (%d deleted)", x.FirstSeq, x.LastSeq, x.Deleted)},
		{"max age", (time.Duration(x.MaxAgeSeconds) * time.Second).String()},
	}
	if c := x.Consumer; c != nil {
		rows = append(rows,
			[2]string{"consumer", c.Stream + "/" + c.Name},
			[2]string{"pending", strconv.FormatUint(c.NumPending, 10)},
			[2]string{"ack pending", strconv.Itoa(c.NumAckPending)},
			[2]string{"redelivered", strconv.Itoa(c.NumRedelivered)},
			[2]string{"pull requests waiting", strconv.Itoa(c.NumWaiting)},
			[2]string{"max deliver", strconv.Itoa(c.MaxDeliver)})
	}
	for _, w := range x.Warnings {
		rows = append(rows, [2]string{"warning", w})
	}
	return backend.ExtraStats{JSON: x, Title: "NATS JetStream", Rows: rows}
}

var _ backend.DoctorChecker = (*Stream)(nil)

// DoctorChecks checks that what a run removes from the DLQ stream stays
// removed after a crash of the server, and, for an advisory stream, that
// the consumer it captures exists and is not stalled with messages that
// reached max deliveries but have no advisory yet (backend.DoctorChecker).
func (s *Stream) DoctorChecks(ctx context.Context) []backend.DoctorCheck {
	if s.missing {
		return nil
	}
	in, err := s.info(ctx)
	if err != nil {
		return []backend.DoctorCheck{{Name: "DLQ stream " + s.src.stream, Detail: err.Error(), Fix: "check the server"}}
	}
	checks := []backend.DoctorCheck{s.durabilityCheck(in)}
	if !s.src.advisories {
		return checks
	}
	stream, consumer, ok := capturedConsumer(in.Config.Subjects)
	if !ok {
		return checks // a wildcard advisory stream captures no one consumer
	}
	name := "consumer " + stream + "/" + consumer
	cs, err := s.consumerState(ctx, stream, consumer)
	switch {
	case err != nil:
		return append(checks, backend.DoctorCheck{Name: name, Detail: err.Error(),
			Fix: "create the consumer, or run dlq init for the consumer that reads the stream"})
	case cs.Stalled != nil:
		return append(checks, backend.DoctorCheck{Name: name, Detail: cs.stalledDetail(), Fix: stalledFix()})
	}
	return append(checks, backend.DoctorCheck{Name: name, OK: true, Detail: fmt.Sprintf("exists: %d ack pending, %d redelivered, %d pull requests waiting",
		cs.NumAckPending, cs.NumRedelivered, cs.NumWaiting)})
}
