package kafkadlq

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHeaderLayout pins what toKafkaRecord relies on to read a record's
// headers as KafkaHeader without copying them: the same fields,
// of the same types, at the same offsets, and the same size. A franz-go
// upgrade that changes kgo.RecordHeader fails here, not in a scan.
func TestHeaderLayout(t *testing.T) {
	k, e := reflect.TypeOf(kgo.RecordHeader{}), reflect.TypeOf(KafkaHeader{})
	if k.Size() != e.Size() || k.Align() != e.Align() || k.NumField() != e.NumField() {
		t.Fatalf("kgo.RecordHeader is %d bytes, %d fields; KafkaHeader %d bytes, %d fields", k.Size(), k.NumField(), e.Size(), e.NumField())
	}
	for i := range k.NumField() {
		kf, ef := k.Field(i), e.Field(i)
		if kf.Name != ef.Name || kf.Type != ef.Type || kf.Offset != ef.Offset {
			t.Fatalf("field %d: kgo %s %s at %d, envelope %s %s at %d", i, kf.Name, kf.Type, kf.Offset, ef.Name, ef.Type, ef.Offset)
		}
	}
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}}
	hs := toKafkaRecord(r).Headers
	if len(hs) != 2 || hs[0].Key != "a" || string(hs[0].Value) != "1" || hs[1].Key != "b" || hs[1].Value != nil {
		t.Fatalf("headers read as %+v", hs)
	}
	if toKafkaRecord(&kgo.Record{}).Headers != nil {
		t.Fatal("a record without headers has headers")
	}
}
