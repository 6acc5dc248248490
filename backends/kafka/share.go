package kafkadlq

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/envelope"
)

// Header names a Kafka 4.4 broker writes on the dead letters of a share
// group (KIP-1191); every value is a UTF-8 string, numbers in decimal. By
// default (errors.deadletterqueue.copy.record.enable=false) the dead
// letter has no key and no value: these headers are all it holds.
const (
	SharePrefix        = "__dlq.errors."
	ShareTopic         = "__dlq.errors.topic"
	SharePartition     = "__dlq.errors.partition"
	ShareOffset        = "__dlq.errors.offset"
	ShareGroup         = "__dlq.errors.group"
	ShareDeliveryCount = "__dlq.errors.delivery.count"
	ShareMessage       = "__dlq.errors.message"
	// ShareDraftPrefix is the spelling a draft proposal (KIP-1317) gives
	// the same headers: _dlq.errors.original.topic, .original.partition,
	// .original.offset, and _dlq.errors.disposition for why the record
	// was dead-lettered.
	ShareDraftPrefix = "_dlq.errors."
)

// SourceGoneHeader is the header dlqctl adds to a share-group dead letter
// whose source record it could not read back: its value says why (the
// offset is below the log start, the topic is gone, …). A header-only
// dead letter with it decodes as malformed, so nothing redrives it; one
// the broker copied keeps its key and value (not its headers).
const SourceGoneHeader = "dlqctl_source_gone"

// shareHeader says whether a header belongs to a share group's
// dead-lettering (either spelling, or dlqctl's source-gone note).
func shareHeader(name string) bool {
	return strings.HasPrefix(name, SharePrefix) || strings.HasPrefix(name, ShareDraftPrefix) || name == SourceGoneHeader
}

// shareDeadLetter is what a share group's dead-lettering headers say.
type shareDeadLetter struct {
	Topic         string
	Partition     int32
	Offset        int64
	Group         string
	DeliveryCount int
	Message       string
	Disposition   string
	// Gone is why the source record could not be read back ("" when it
	// was, or when nothing tried).
	Gone string
}

// origin is where the record was consumed from.
func (s shareDeadLetter) origin() KafkaOrigin {
	return KafkaOrigin{Topic: s.Topic, Partition: s.Partition, Offset: s.Offset, Group: s.Group}
}

// shareField is the part of a share header's name after its prefix, with
// the draft's "original." dropped: "topic", "partition", "offset",
// "group", "delivery.count", "message", "disposition".
func shareField(name string) (string, bool) {
	var rest string
	switch {
	case strings.HasPrefix(name, SharePrefix):
		rest = name[len(SharePrefix):]
	case strings.HasPrefix(name, ShareDraftPrefix):
		rest = name[len(ShareDraftPrefix):]
	default:
		return "", false
	}
	return strings.TrimPrefix(rest, "original."), true
}

// shareDeadLetterOf reads a share group's dead-lettering headers: ok is
// false when the record has no origin topic among them. The last header of
// a name wins; a number that does not parse is an error.
func shareDeadLetterOf(hs []KafkaHeader) (s shareDeadLetter, ok bool, err error) {
	s.Partition, s.Offset = -1, -1
	var errs []error
	num := func(h KafkaHeader, bits int) int64 {
		n, err := strconv.ParseInt(string(h.Value), 10, bits)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("header %s: want a whole number, got %q", h.Key, envelope.TruncateForError(string(h.Value))))
			return -1
		}
		return n
	}
	for _, h := range hs {
		if h.Key == SourceGoneHeader {
			s.Gone = string(h.Value)
			continue
		}
		f, isShare := shareField(h.Key)
		if !isShare {
			continue
		}
		if !utf8.Valid(h.Value) {
			errs = append(errs, fmt.Errorf("header %s: invalid UTF-8", h.Key))
			continue
		}
		switch f {
		case "topic":
			s.Topic, ok = string(h.Value), true
		case "partition":
			s.Partition = int32(num(h, 32))
		case "offset":
			s.Offset = num(h, 64)
		case "group":
			s.Group = string(h.Value)
		case "delivery.count":
			s.DeliveryCount = int(max(num(h, 16), 0))
		case "message":
			s.Message = string(h.Value)
		case "disposition":
			s.Disposition = string(h.Value)
		}
	}
	if !ok {
		return shareDeadLetter{Partition: -1, Offset: -1}, false, nil
	}
	return s, true, errors.Join(errs...)
}

// applyShare fills an envelope from a share group's dead-lettering: the
// origin topic and group, the delivery count as attempts, and the cause as
// the error when no other header gave one. A source that could not be
// read back makes a header-only entry malformed, with the reason.
func applyShare(e *envelope.Envelope, s shareDeadLetter, fail func(error)) {
	e.Origin.Topic = s.Topic
	if s.Group != "" {
		e.Origin.Subscription = s.Group
	}
	if e.Attempts == 0 {
		e.Attempts = s.DeliveryCount
	}
	if s.Gone != "" && len(e.Payload) == 0 && e.Key == "" {
		fail(errors.New(envelope.SourceGone + s.Gone))
	}
}
