package kafkadlq

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// shareRecord is a share-group dead letter as the 4.4 broker writes it
// with copy off: no key, no value, only its headers, spelt with prefix.
func shareRecord(prefix string, original bool) KafkaRecord {
	o := ""
	if original {
		o = "original."
	}
	return KafkaRecord{
		Topic: "dlq.orders", Partition: 0, Offset: 7, Timestamp: time.UnixMilli(1764582060000),
		Headers: []KafkaHeader{
			{Key: prefix + o + "topic", Value: []byte("orders")},
			{Key: prefix + o + "partition", Value: []byte("3")},
			{Key: prefix + o + "offset", Value: []byte("1234")},
			{Key: prefix + "group", Value: []byte("order-workers")},
			{Key: prefix + "delivery.count", Value: []byte("5")},
			{Key: prefix + "message", Value: []byte("Offset delivery count exceeded the threshold.")},
		},
	}
}

func TestFromKafkaShareSourceGone(t *testing.T) {
	r := shareRecord(SharePrefix, false)
	r.Headers = append(r.Headers, KafkaHeader{Key: SourceGoneHeader, Value: []byte("offset 1234 is below log start 1500 of orders/3")})
	e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if !strings.Contains(e.Malformed, "source gone: offset 1234 is below log start 1500 of orders/3") {
		t.Fatalf("malformed = %q", e.Malformed)
	}
	if !DeadLetterHeader(SourceGoneHeader) || !DeadLetterHeader(ShareTopic) || !DeadLetterHeader("_dlq.errors.disposition") {
		t.Error("a redrive must drop the share headers and the source-gone note")
	}
}

func TestFromKafkaShareBadNumber(t *testing.T) {
	r := shareRecord(SharePrefix, false)
	r.Headers[2].Value = []byte("12x")
	e := FromKafka(r, envelope.EventIDSource{Kind: "key"}, envelope.DefaultFieldNames())
	if !strings.Contains(e.Malformed, "header __dlq.errors.offset: want a whole number") {
		t.Fatalf("malformed = %q", e.Malformed)
	}
}

func TestFromKafkaShareGroup(t *testing.T) {
	for _, c := range []struct {
		name     string
		prefix   string
		original bool
	}{{"KIP-1191", SharePrefix, false}, {"KIP-1317 draft", ShareDraftPrefix, true}} {
		t.Run(c.name, func(t *testing.T) {
			// Header-only: no event ID until the source gives one.
			r := shareRecord(c.prefix, c.original)
			e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
			if e.Origin.Topic != "orders" || e.Origin.Subscription != "order-workers" || e.Attempts != 5 ||
				e.LastError != "Offset delivery count exceeded the threshold." {
				t.Fatalf("header-only: %+v", e)
			}
			if !strings.Contains(e.Malformed, "no event ID header") {
				t.Errorf("header-only malformed = %q, want no event ID header", e.Malformed)
			}
			o, err := OriginOf(r.Headers)
			if err != nil || o != (KafkaOrigin{Topic: "orders", Partition: 3, Offset: 1234, Group: "order-workers"}) {
				t.Errorf("OriginOf = %+v, %v", o, err)
			}
			// Rebuilt (or copied): the source's key, value and headers.
			r.Key, r.Value = []byte("order-7"), []byte(`{"id":7}`)
			r.Headers = append([]KafkaHeader{{Key: "event_id", Value: []byte("E7")}}, r.Headers...)
			e = FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
			if e.Malformed != "" || e.EventID != "E7" || e.Key != "order-7" || e.Origin.Topic != "orders" || e.Attempts != 5 {
				t.Fatalf("rebuilt: %+v", e)
			}
			if e.DeadLetteredAt != r.Timestamp.UTC() {
				t.Errorf("dead_lettered_at = %s, want the DLQ write time %s", e.DeadLetteredAt, r.Timestamp.UTC())
			}
			offsetHeader := c.prefix + "offset"
			if c.original {
				offsetHeader = c.prefix + "original.offset"
			}
			if e.Properties[offsetHeader] != "1234" {
				t.Errorf("properties = %v, want the share headers shown", e.Properties)
			}
		})
	}
}

func TestSplitShareInit(t *testing.T) {
	rest, group, cp, err := splitShareInit("kafka://u:p@b:9092?group=workers&copy=1&timeout=5s")
	if err != nil || group != "workers" || cp != "true" || rest != "kafka://u:p@b:9092?timeout=5s&topic=dlq.workers" {
		t.Fatalf("got %q %q %q %v", rest, group, cp, err)
	}
	if _, _, _, err := splitShareInit("kafka://b:9092?topic=dlq.x"); err == nil || !strings.Contains(err.Error(), "dlq init needs &group=G") {
		t.Fatalf("no group: %v", err)
	}
	if _, _, _, err := splitShareInit("kafka://b:9092?group=g&copy=maybe"); err == nil || !strings.Contains(err.Error(), "want true or false") {
		t.Fatalf("bad copy: %v", err)
	}
}
