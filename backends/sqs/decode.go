package sqsdlq

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/envelope"
)

// SQS system attribute names dlqctl reads off a DLQ message.
const (
	SQSDeadLetterSourceArn     = "DeadLetterQueueSourceArn"
	SQSReceiveCount            = "ApproximateReceiveCount"
	SQSSentTimestamp           = "SentTimestamp"
	SQSFirstReceiveTimestamp   = "ApproximateFirstReceiveTimestamp"
	SQSMessageGroupID          = "MessageGroupId"
	SQSSequenceNumber          = "SequenceNumber"
	SQSMessageDeduplicationID  = "MessageDeduplicationId"
	sqsEventBridgeErrorCode    = "ERROR_CODE"
	sqsEventBridgeErrorMessage = "ERROR_MESSAGE"
	sqsLambdaErrorCode         = "ErrorCode"
	sqsLambdaErrorMessage      = "ErrorMessage"
	sqsEventBridgeRuleArn      = "RULE_ARN"
	sqsEventBridgeTargetArn    = "TARGET_ARN"
)

// SQSPackedFields is the one message attribute under which dlqctl keeps,
// as a JSON object of strings, the envelope fields and markers that do not
// fit in SQS's limit of 10 message attributes. Its keys read exactly as
// attributes of those names would; a real attribute wins over a packed
// key of the same name.
const SQSPackedFields = "dlqctl_fields"

// SQSSourceArnProperty keeps the full ARN of the queue an SQS message was
// dead-lettered from (origin.topic holds only the queue name).
const SQSSourceArnProperty = "sqs.source_arn"

// SQSClaimedOriginProperty keeps an origin_stream attribute that disagrees
// with the queue SQS recorded in DeadLetterQueueSourceArn. What SQS
// recorded is the origin (a producer must not choose where its message
// goes on redrive); the claim stays visible to whoever reads the entry.
const SQSClaimedOriginProperty = "sqs.claimed_origin"

// SQSMessage is what the SQS backend reads off one DLQ message; it keeps
// this package free of the AWS SDK.
type SQSMessage struct {
	ID   string // MessageId
	Body string
	// Attributes are the system attributes (ApproximateReceiveCount,
	// SentTimestamp, DeadLetterQueueSourceArn, MessageGroupId, …).
	Attributes map[string]string
	// MessageAttributes are the String and Number message attributes.
	MessageAttributes map[string]string
	// BinaryAttributes are the Binary message attributes; they become
	// properties holding their base64 text.
	BinaryAttributes map[string][]byte
	// SourceMaxReceiveCount is the maxReceiveCount of the redrive policy
	// of the queue the message was dead-lettered from, 0 when unknown:
	// SQS dead-letters a message when its receive count passes it, so it
	// is the number of times the source's consumers received it.
	SourceMaxReceiveCount int
}

// ParseSQSEventIDSource parses --event-id-from for SQS: attribute:NAME or
// json:PATH ("" reads the event_id/eventId attribute).
func ParseSQSEventIDSource(s string) (envelope.EventIDSource, error) {
	if s == "" {
		return envelope.EventIDSource{Kind: "attribute"}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if ok && name != "" && (kind == "attribute" || kind == "json") {
		return envelope.EventIDSource{Kind: kind, Name: name}, nil
	}
	return envelope.EventIDSource{}, fmt.Errorf("--event-id-from %q: want attribute:NAME or json:PATH for SQS", s)
}

// SQSQueueName is the queue name at the end of an SQS queue ARN
// (arn:aws:sqs:REGION:ACCOUNT:NAME), or "" when arn is not one.
func SQSQueueName(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return ""
	}
	return parts[5]
}

// FromSQS maps an SQS DLQ message to the canonical envelope: id is the
// MessageId; message attributes named like envelope fields fill them and
// the rest are properties; DeadLetterQueueSourceArn gives origin.topic
// (the queue name; the ARN stays in the sqs.source_arn property), and wins
// over an origin_stream attribute, which is then kept as the
// sqs.claimed_origin property;
// MessageGroupId is the key. attempts is the attempts attribute, else the
// source queue's maxReceiveCount, else ApproximateReceiveCount minus this
// receive. SQS records no dead-letter time: without a dead_lettered_at
// attribute it is the SentTimestamp, which SQS keeps from the first send.
// An EventBridge, SNS or Lambda DLQ message's error attributes fill
// last_error (they name no queue to go back to, so a redrive needs --to).
// It never fails.
func FromSQS(m SQSMessage, from envelope.EventIDSource, names envelope.FieldNames) envelope.Envelope {
	e := envelope.Envelope{ID: m.ID, Origin: envelope.Origin{Backend: "sqs"}}
	fields, packErr := sqsFields(m)
	kv := envelope.NewKVReader(fields, names)
	if packErr != nil {
		kv.Fail(packErr)
	}
	kv.ReadCommon(&e)
	body := []byte(m.Body)
	if enc, _ := kv.Get(envelope.FPayloadEncoding); enc == envelope.EncodingBase64 {
		// An SQS body is text: dlqctl import writes other bytes as base64.
		raw, err := base64.StdEncoding.DecodeString(m.Body)
		if err != nil {
			kv.Fail(errors.New("payload: payload_encoding base64 but the body is not base64"))
		} else {
			body = raw
		}
	}
	kv.SetPayload(&e, body)
	if e.Key == "" {
		e.Key = m.Attributes[SQSMessageGroupID]
	}
	claimed := ""
	if arn := m.Attributes[SQSDeadLetterSourceArn]; arn != "" {
		recorded := SQSQueueName(arn)
		if recorded == "" {
			recorded = arn
		}
		if c := e.Origin.Topic; c != "" && c != recorded && c != arn {
			claimed = c
		}
		e.Origin.Topic = recorded
	}
	if e.LastError == "" {
		e.LastError = sqsLastError(fields)
	}
	if _, ok := kv.Get(envelope.FAttempts); !ok {
		switch rc, _ := strconv.Atoi(m.Attributes[SQSReceiveCount]); {
		case m.SourceMaxReceiveCount > 0:
			e.Attempts = m.SourceMaxReceiveCount
		case rc > 1:
			e.Attempts = rc - 1
		}
	}
	e.DeadLetteredAt = sqsDeadLetteredAt(m, fields, e.DeadLetteredAt)
	if e.FirstReceivedAt.IsZero() {
		e.FirstReceivedAt = millis(m.Attributes[SQSFirstReceiveTimestamp])
	}
	kv.Rest(&e, false)
	if arn := m.Attributes[SQSDeadLetterSourceArn]; arn != "" {
		envelope.SetProperty(&e, SQSSourceArnProperty, arn)
	}
	if claimed != "" {
		envelope.SetProperty(&e, SQSClaimedOriginProperty, claimed)
	}
	if from.Kind == "json" || from.Name != "" || e.EventID == "" {
		id, err := sqsEventID(m, from, fields, names)
		if err != nil {
			kv.Fail(err)
		}
		e.EventID = id
	}
	e = kv.Finish(e, nil)
	if e.Malformed != "" {
		e.Raw = sqsRaw(m)
	}
	return e
}

// sqsFields is m's attributes by name, the packed ones (dlqctl import's
// SQSPackedFields) unpacked and binary ones in base64; packErr says the
// packed attribute did not decode.
func sqsFields(m SQSMessage) (fields map[string]string, packErr error) {
	fields = make(map[string]string, len(m.MessageAttributes)+len(m.BinaryAttributes))
	if packed, ok := m.MessageAttributes[SQSPackedFields]; ok {
		var kv map[string]string
		if err := json.Unmarshal([]byte(packed), &kv); err != nil {
			packErr = fmt.Errorf("%s: not a JSON object of strings", SQSPackedFields)
		}
		for k, v := range kv {
			fields[k] = v
		}
	}
	for k, v := range m.MessageAttributes {
		if k != SQSPackedFields {
			fields[k] = v
		}
	}
	for k, v := range m.BinaryAttributes {
		fields[k] = base64.StdEncoding.EncodeToString(v)
	}
	return fields, packErr
}

// sqsLastError is the error an EventBridge, SNS or Lambda DLQ message's
// attributes record, "" when none.
func sqsLastError(fields map[string]string) string {
	for _, pair := range [][2]string{{sqsEventBridgeErrorMessage, sqsEventBridgeErrorCode}, {sqsLambdaErrorMessage, sqsLambdaErrorCode}} {
		msg, code := fields[pair[0]], fields[pair[1]]
		switch {
		case msg != "" && code != "":
			return code + ": " + msg
		case msg != "":
			return msg
		case code != "":
			return code
		}
	}
	return ""
}

// sqsDeadLetteredAt is the dead-letter time of m, given the one its
// attributes recorded (zero when none).
func sqsDeadLetteredAt(m SQSMessage, fields map[string]string, recorded time.Time) time.Time {
	// SQS moves a message to its DLQ as it is: a DeadLetterQueueSourceArn
	// says SQS dead-lettered it after its last send, so the send time
	// bounds that dead-lettering, even for a message dlqctl import wrote
	// (sent again by a redrive of SQS's own), and a dead_lettered_at
	// attribute from before that send is an earlier dead-lettering's.
	sent := millis(m.Attributes[SQSSentTimestamp])
	_, imported := fields[envelope.ImportedFromProperty]
	sqsMoved := m.Attributes[SQSDeadLetterSourceArn] != ""
	switch {
	case recorded.IsZero() && (!imported || sqsMoved):
		return sent
	case sqsMoved && sent.After(recorded):
		return sent
	}
	return recorded
}

func sqsEventID(m SQSMessage, from envelope.EventIDSource, fields map[string]string, names envelope.FieldNames) (string, error) {
	if from.Kind == "json" {
		return envelope.EventIDAtJSONPath([]byte(m.Body), from.Name)
	}
	candidates := names[envelope.FieldEventID]
	if from.Name != "" {
		candidates = []string{from.Name}
	}
	for _, n := range candidates {
		if v := fields[n]; v != "" {
			if !utf8.ValidString(v) {
				return "", fmt.Errorf("event ID attribute %s: invalid UTF-8", n)
			}
			return v, nil
		}
	}
	return "", fmt.Errorf("no event ID attribute (looked for %s)", strings.Join(candidates, ", "))
}

// millis reads an SQS timestamp (milliseconds since the epoch); the zero
// time when it is missing or unreadable.
func millis(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > 253402300799999 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// sqsRaw is a malformed message as it was read, so that export loses
// nothing: its body, attributes and message attributes.
func sqsRaw(m SQSMessage) []byte {
	b, _ := json.Marshal(struct {
		Body              string            `json:"body"`
		Attributes        map[string]string `json:"attributes,omitempty"`
		MessageAttributes map[string]string `json:"message_attributes,omitempty"`
		BinaryAttributes  map[string][]byte `json:"binary_attributes,omitempty"`
	}{strings.ToValidUTF8(m.Body, "\uFFFD"), m.Attributes, m.MessageAttributes, m.BinaryAttributes})
	return b
}
