package sqsdlq

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/envelope/envelopetest"
)

func sqsMsg() SQSMessage {
	return SQSMessage{
		ID:   "a4b4d115-ed6e-41a0-af06-3a68ac17deed",
		Body: `{"orderId":"order-123","amount":1200}`,
		Attributes: map[string]string{
			SQSDeadLetterSourceArn:   "arn:aws:sqs:eu-west-1:123456789012:orders",
			SQSReceiveCount:          "3",
			SQSSentTimestamp:         "1796040000000",
			SQSFirstReceiveTimestamp: "1796040001000",
		},
		MessageAttributes: map[string]string{"event_id": "E42", "tenant": "acme"},
	}
}

func TestFromSQS(t *testing.T) {
	e := FromSQS(sqsMsg(), envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames())
	if e.Malformed != "" {
		t.Fatalf("Malformed = %q", e.Malformed)
	}
	if e.ID != "a4b4d115-ed6e-41a0-af06-3a68ac17deed" || e.EventID != "E42" {
		t.Errorf("ID %q EventID %q", e.ID, e.EventID)
	}
	if e.Origin != (envelope.Origin{Backend: "sqs", Topic: "orders"}) {
		t.Errorf("Origin = %+v", e.Origin)
	}
	if e.Attempts != 2 {
		t.Errorf("Attempts = %d, want ApproximateReceiveCount minus this receive (2)", e.Attempts)
	}
	if want := time.UnixMilli(1796040000000).UTC(); !e.DeadLetteredAt.Equal(want) || e.DeadLetteredAt.Location() != time.UTC {
		t.Errorf("DeadLetteredAt = %v, want SentTimestamp %v", e.DeadLetteredAt, want)
	}
	if want := time.UnixMilli(1796040001000).UTC(); !e.FirstReceivedAt.Equal(want) {
		t.Errorf("FirstReceivedAt = %v, want %v", e.FirstReceivedAt, want)
	}
	want := map[string]string{"tenant": "acme", SQSSourceArnProperty: "arn:aws:sqs:eu-west-1:123456789012:orders"}
	if !maps.Equal(e.Properties, want) {
		t.Errorf("Properties = %v, want %v", e.Properties, want)
	}
	if e.PayloadEncoding != envelope.EncodingJSON || !e.FingerprintComputed || e.Fingerprint != envelope.ComputeFingerprint([]byte(sqsMsg().Body)) {
		t.Errorf("payload %s, fingerprint %s computed=%v", e.PayloadEncoding, e.Fingerprint, e.FingerprintComputed)
	}
}

func TestFromSQSAttempts(t *testing.T) {
	m := sqsMsg()
	m.SourceMaxReceiveCount = 5
	if e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); e.Attempts != 5 {
		t.Errorf("with the source's maxReceiveCount: Attempts = %d, want 5", e.Attempts)
	}
	m.MessageAttributes["attempts"] = "9"
	if e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); e.Attempts != 9 {
		t.Errorf("with an attempts attribute: Attempts = %d, want 9", e.Attempts)
	}
	m.MessageAttributes["attempts"] = "many"
	if e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); !strings.Contains(e.Malformed, "attempts") {
		t.Errorf("unreadable attempts: Malformed = %q", e.Malformed)
	}
}

func TestFromSQSFIFOKey(t *testing.T) {
	m := sqsMsg()
	m.Attributes[SQSMessageGroupID] = "order-123"
	m.Attributes[SQSSequenceNumber] = "18849496460467696128"
	e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames())
	if e.Key != "order-123" {
		t.Errorf("Key = %q, want the MessageGroupId", e.Key)
	}
	m.MessageAttributes["key"] = "explicit"
	if e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); e.Key != "explicit" {
		t.Errorf("a key attribute wins: Key = %q", e.Key)
	}
}

// An EventBridge target DLQ message: no source queue, the error in
// attributes.
func TestFromSQSEventBridge(t *testing.T) {
	m := SQSMessage{
		ID:         "m-1",
		Body:       `{"detail":{"id":"E7"}}`,
		Attributes: map[string]string{SQSReceiveCount: "1", SQSSentTimestamp: "1796040000000"},
		MessageAttributes: map[string]string{
			"ERROR_CODE":    "SDK_CLIENT_ERROR",
			"ERROR_MESSAGE": "Unable to invoke Lambda: connection timed out",
			"RULE_ARN":      "arn:aws:events:eu-west-1:123456789012:rule/orders",
			"TARGET_ARN":    "arn:aws:lambda:eu-west-1:123456789012:function:fulfil",
		},
	}
	e := FromSQS(m, envelope.EventIDSource{Kind: "json", Name: "detail.id"}, envelope.DefaultFieldNames())
	if e.Malformed != "" {
		t.Fatalf("Malformed = %q", e.Malformed)
	}
	if e.EventID != "E7" || e.Origin.Topic != "" {
		t.Errorf("EventID %q origin %q (want E7 and no origin: the redrive needs --to)", e.EventID, e.Origin.Topic)
	}
	if e.LastError != "SDK_CLIENT_ERROR: Unable to invoke Lambda: connection timed out" {
		t.Errorf("LastError = %q", e.LastError)
	}
	if e.Properties["RULE_ARN"] == "" || e.Properties["TARGET_ARN"] == "" || e.Properties["ERROR_CODE"] == "" {
		t.Errorf("Properties = %v, want the EventBridge attributes kept", e.Properties)
	}
	if e.Attempts != 0 {
		t.Errorf("Attempts = %d, want 0 (received once, on the DLQ)", e.Attempts)
	}
}

func TestFromSQSPackedFields(t *testing.T) {
	m := sqsMsg()
	m.MessageAttributes[SQSPackedFields] = `{"owner":"team-payments","event_id":"packed","redrive_count":"2"}`
	e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames())
	if e.Malformed != "" || e.Owner != "team-payments" || e.RedriveCount != 2 || e.EventID != "E42" {
		t.Errorf("Malformed %q Owner %q RedriveCount %d EventID %q (a real attribute wins)", e.Malformed, e.Owner, e.RedriveCount, e.EventID)
	}
	if _, ok := e.Properties[SQSPackedFields]; ok {
		t.Errorf("the packed attribute itself became a property")
	}
	m.MessageAttributes[SQSPackedFields] = `[1,2]`
	if e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); !strings.Contains(e.Malformed, SQSPackedFields) {
		t.Errorf("bad packed fields: Malformed = %q", e.Malformed)
	}
}

func TestFromSQSMalformed(t *testing.T) {
	m := sqsMsg()
	delete(m.MessageAttributes, "event_id")
	e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames())
	if !strings.Contains(e.Malformed, "event ID") || len(e.Raw) == 0 || e.ID != m.ID {
		t.Fatalf("Malformed %q Raw %q ID %q", e.Malformed, e.Raw, e.ID)
	}
	m = sqsMsg()
	m.MessageAttributes["payload_encoding"] = "base64"
	m.Body = "not base64!"
	if e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); !strings.Contains(e.Malformed, "base64") {
		t.Errorf("bad base64 body: Malformed = %q", e.Malformed)
	}
}

func TestFromSQSBase64Body(t *testing.T) {
	m := sqsMsg()
	m.MessageAttributes["payload_encoding"] = "base64"
	m.Body = "AAEC/w=="
	e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames())
	if e.Malformed != "" || string(e.Payload) != "\x00\x01\x02\xff" || e.PayloadEncoding != envelope.EncodingBase64 {
		t.Errorf("Malformed %q Payload %q encoding %s", e.Malformed, e.Payload, e.PayloadEncoding)
	}
}

func TestParseSQSEventIDSource(t *testing.T) {
	for in, want := range map[string]envelope.EventIDSource{
		"":                  {Kind: "attribute"},
		"attribute:orderId": {Kind: "attribute", Name: "orderId"},
		"json:detail.id":    {Kind: "json", Name: "detail.id"},
	} {
		got, err := ParseSQSEventIDSource(in)
		if err != nil || got != want {
			t.Errorf("ParseSQSEventIDSource(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"key", "property:x", "attribute:", "header:x"} {
		if _, err := ParseSQSEventIDSource(bad); err == nil || !strings.Contains(err.Error(), "attribute:NAME") {
			t.Errorf("ParseSQSEventIDSource(%q) error = %v", bad, err)
		}
	}
}

func FuzzFromSQS(f *testing.F) {
	f.Add("id", `{"a":1}`, []byte(`{"event_id":"E1"}`), []byte(`{"ApproximateReceiveCount":"3"}`), "", 0)
	f.Add("id", "AAEC", []byte(`{"eventId":"E1","payload_encoding":"base64"}`), []byte(`{"SentTimestamp":"x"}`), "json:a.b", 2)
	f.Add("id", "x", []byte(`{"dlqctl_fields":"{\"event_id\":\"E\"}"}`), []byte(`{"MessageGroupId":"g"}`), "attribute:k", -1)
	f.Fuzz(func(t *testing.T, id, body string, attrs, sys []byte, from string, maxRC int) {
		id = envelopetest.FuzzID(id)
		src, err := ParseSQSEventIDSource(from)
		if err != nil {
			src = envelope.EventIDSource{Kind: "attribute"}
		}
		m := SQSMessage{ID: id, Body: body, MessageAttributes: envelopetest.FuzzFields(attrs), Attributes: envelopetest.FuzzFields(sys), SourceMaxReceiveCount: maxRC}
		e := FromSQS(m, src, envelope.DefaultFieldNames())
		if e.Origin.Backend != "sqs" {
			t.Fatalf("Origin.Backend = %q", e.Origin.Backend)
		}
		envelopetest.Check(t, e, id)
	})
}

// TestFromSQSRecordedOriginWins: a producer-set origin_stream attribute
// does not override the queue SQS recorded in DeadLetterQueueSourceArn; a
// disagreeing one stays visible as a property, an agreeing one adds none.
func TestFromSQSRecordedOriginWins(t *testing.T) {
	m := sqsMsg()
	m.MessageAttributes["origin_stream"] = "payments"
	e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames())
	if e.Origin.Topic != "orders" {
		t.Fatalf("Origin.Topic = %q, want orders (DeadLetterQueueSourceArn)", e.Origin.Topic)
	}
	if got := e.Properties[SQSClaimedOriginProperty]; got != "payments" {
		t.Fatalf("%s = %q, want the claimed payments", SQSClaimedOriginProperty, got)
	}
	m.MessageAttributes["origin_stream"] = "orders"
	e = FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames())
	if _, ok := e.Properties[SQSClaimedOriginProperty]; ok || e.Origin.Topic != "orders" {
		t.Fatalf("agreeing attribute: origin %q properties %v", e.Origin.Topic, e.Properties)
	}
	// Without a recorded source (an EventBridge DLQ, an import), the
	// attribute is the origin.
	delete(m.Attributes, SQSDeadLetterSourceArn)
	m.MessageAttributes["origin_stream"] = "payments"
	if e = FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); e.Origin.Topic != "payments" {
		t.Fatalf("no DeadLetterQueueSourceArn: origin %q", e.Origin.Topic)
	}
}

// TestFromSQSDeadLetteredAgain: a message that dlqctl import wrote, sent
// back to its source and dead-lettered there by SQS itself gets an age
// (its send time bounds the dead-lettering), and a dead_lettered_at
// attribute from before that send gives way to it. A message that only
// the import wrote keeps no time but its own.
func TestFromSQSDeadLetteredAgain(t *testing.T) {
	sent := time.UnixMilli(1796040000000).UTC()
	cases := []struct {
		name string
		edit func(m *SQSMessage)
		want time.Time
	}{
		{"imported, then dead-lettered by SQS", func(m *SQSMessage) {
			m.MessageAttributes[envelope.ImportedFromProperty] = "orders-dlq/7"
		}, sent},
		{"imported with an old dead_lettered_at, then dead-lettered by SQS", func(m *SQSMessage) {
			m.MessageAttributes[envelope.ImportedFromProperty] = "orders-dlq/7"
			m.MessageAttributes["dead_lettered_at"] = "2026-11-29T10:05:00Z"
		}, sent},
		{"imported only", func(m *SQSMessage) {
			m.MessageAttributes[envelope.ImportedFromProperty] = "orders-dlq/7"
			delete(m.Attributes, SQSDeadLetterSourceArn)
		}, time.Time{}},
		{"imported only, with its dead_lettered_at", func(m *SQSMessage) {
			m.MessageAttributes[envelope.ImportedFromProperty] = "orders-dlq/7"
			m.MessageAttributes["dead_lettered_at"] = "2026-11-29T10:05:00Z"
			delete(m.Attributes, SQSDeadLetterSourceArn)
		}, time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := sqsMsg()
			c.edit(&m)
			if e := FromSQS(m, envelope.EventIDSource{Kind: "attribute"}, envelope.DefaultFieldNames()); !e.DeadLetteredAt.Equal(c.want) {
				t.Errorf("dead_lettered_at %v, want %v", e.DeadLetteredAt, c.want)
			}
		})
	}
}
