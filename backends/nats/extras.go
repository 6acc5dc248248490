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
}

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
	if s.src.advisories {
		if stream, consumer, ok := capturedConsumer(in.Config.Subjects); ok {
			cs, err := s.consumerState(ctx, stream, consumer)
			if err != nil {
				x.Warnings = append(x.Warnings, err.Error())
			} else {
				x.Consumer = cs
				if cs.NumRedelivered > 0 {
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
	return &ConsumerState{Stream: stream, Name: consumer, MaxDeliver: in.Config.MaxDeliver, NumPending: in.NumPending,
		NumAckPending: in.NumAckPending, NumRedelivered: in.NumRedelivered}, nil
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
			[2]string{"max deliver", strconv.Itoa(c.MaxDeliver)})
	}
	for _, w := range x.Warnings {
		rows = append(rows, [2]string{"warning", w})
	}
	return backend.ExtraStats{JSON: x, Title: "NATS JetStream", Rows: rows}
}
