package kafkadlq_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
)

// shareShape makes tg's DLQs hold share-group dead letters as a 4.4
// broker writes them with copy off: the cases' envelopes, and the
// battery's native dead letters, become records of their origin topic and
// header-only dead letters that point at them.
func shareShape(tg *conformance.Target, client clientFunc) {
	tg.Shape = "share"
	tg.Seed = func(t *testing.T, fx conformance.Fixture, es []envelope.Envelope) {
		writeShare(t, client, fx, es, 1)
	}
	tg.Native = func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
		writeShare(t, client, fx, []envelope.Envelope{e}, copies)
	}
	// The destination holds the record already (the dead letter stands
	// for it): from now on it takes no record as large as the record put
	// back, which carries dlqctl's markers besides.
	tg.Refuse = func(t *testing.T, _ conformance.Fixture, dest, _ string) {
		_, adm := client(t)
		limit := "200"
		resp, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, dest)
		if err == nil {
			_, err = resp.On(dest, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// A twin's dead letters point at records of the same origin, at other
	// offsets.
	snap := tg.Snapshot
	tg.Snapshot = func(t *testing.T, fx conformance.Fixture) []string {
		lines := snap(t, fx)
		for i, l := range lines {
			lines[i] = shareOffsetHeader.ReplaceAllString(l, "${1}N")
		}
		return lines
	}
	tg.NotApplicable["identical-copies"] = "byte-identical share-group dead letters stand for one source record: one move (two-pointers)"
	tg.NotApplicable["refused-destination"] = "a share-group dead letter naming the DLQ as its origin stands for a record of the DLQ, an entry of its own"
}

// shareOffsetHeader is a dead letter's source offset in a Snapshot line.
var shareOffsetHeader = regexp.MustCompile(`(__dlq\.errors\.offset=)\d+`)

// writeShare writes each envelope of es as a share group's broker leaves
// it: the record (key, payload, event_id and content_type headers) on its
// origin topic, made when missing, and copies dead letters on fx's DLT
// that hold only the __dlq.errors.* headers pointing at it, at the
// dead-letter time.
func writeShare(t *testing.T, client clientFunc, fx conformance.Fixture, es []envelope.Envelope, copies int) {
	t.Helper()
	ctx := context.Background()
	cl, adm := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	made := map[string]bool{}
	srcs := make([]*kgo.Record, len(es))
	for i, e := range es {
		if !made[e.Origin.Topic] {
			made[e.Origin.Topic] = true
			resp, err := adm.CreateTopic(ctx, 1, -1, nil, e.Origin.Topic)
			if err == nil {
				err = resp.Err
			}
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				t.Fatal(err)
			}
		}
		srcs[i] = &kgo.Record{Topic: e.Origin.Topic, Key: []byte(e.Key), Value: e.Payload, Timestamp: e.DeadLetteredAt,
			Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte(e.EventID)}, {Key: "content_type", Value: []byte(e.ContentType)}}}
	}
	if err := cl.ProduceSync(ctx, srcs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var dead []*kgo.Record
	for i, e := range es {
		for range copies {
			dead = append(dead, &kgo.Record{Topic: fx.Self, Timestamp: e.DeadLetteredAt, Headers: []kgo.RecordHeader{
				{Key: "__dlq.errors.topic", Value: []byte(e.Origin.Topic)},
				{Key: "__dlq.errors.partition", Value: []byte(strconv.Itoa(int(srcs[i].Partition)))},
				{Key: "__dlq.errors.offset", Value: []byte(strconv.FormatInt(srcs[i].Offset, 10))},
				{Key: "__dlq.errors.group", Value: []byte("conformance-share")},
				{Key: "__dlq.errors.delivery.count", Value: []byte(strconv.Itoa(e.Attempts))},
				{Key: "__dlq.errors.message", Value: []byte(e.LastError)},
			}})
		}
	}
	if err := cl.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
