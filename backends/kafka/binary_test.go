package kafkadlq_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/envelope"
)

// TestBinaryKeyAndHeaderRoundTrip: a dead letter with a Long key and an
// Avro-style binary header is a well-formed entry, and its redrive puts
// the exact bytes back on the origin.
func TestBinaryKeyAndHeaderRoundTrip(t *testing.T) {
	ctx := ctxFor(t)
	origin := freshTopic(t, "")
	dlt := origin + ".DLT"
	createTopic(t, ctx, origin, 3, nil)
	createTopic(t, ctx, dlt, 1, nil)
	key := be64(-7)                                                // a Long key
	avro := []byte{0x00, 0x00, 0x00, 0x00, 0x2a, 0xff, 0xfe, 0x01} // magic byte, schema ID, binary
	r := springDeadLetter(dlt, 0, time.Now().Add(-time.Minute), origin, 1, 9, "", "EB", `{"n":1}`, "boom")
	r.Key = key
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "avro-schema", Value: avro})
	produceManual(t, ctx, r)
	src := openTopic(t, ctx, dlt, kafkadlq.Options{})
	es := scanAll(t, ctx, src, "")
	if len(es) != 1 || es[0].Malformed != "" {
		t.Fatalf("entries %+v", es)
	}
	e := es[0]
	if k, err := e.KeyBytes(); err != nil || !bytes.Equal(k, key) || e.KeyEncoding != envelope.BinaryEncoding {
		t.Fatalf("key %q (%s): %x %v", e.Key, e.KeyEncoding, k, err)
	}
	if v, err := e.PropertyBytes("avro-schema"); err != nil || !bytes.Equal(v, avro) {
		t.Fatalf("header: %x %v", v, err)
	}
	res, err := src.Publish(ctx, itemsOf(es, origin), backend.Markers{RunID: "run-bin"})
	if err != nil || res[0].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	out := readCommitted(t, ctx, origin)
	if len(out) != 1 || !bytes.Equal(out[0].Key, key) || out[0].Partition != 1 {
		t.Fatalf("origin: %+v", out)
	}
	v, _ := header(out[0], "avro-schema")
	if !bytes.Equal([]byte(v), avro) {
		t.Fatalf("header on the origin %x", v)
	}
}
