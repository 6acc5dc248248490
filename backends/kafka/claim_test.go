package kafkadlq_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
)

// TestOneStateTopic: once a DLT's state is recorded in one state topic, a
// URL (or a plan's URL) naming another is refused at Open, whichever came
// first; a state topic from before claims claims itself.
func TestOneStateTopic(t *testing.T) {
	broker := kafkaServer(t)
	ctx := ctxFor(t)
	open := func(dlt, extra string) (*kafkadlq.Topic, error) {
		src, err := kafkadlq.Open(ctx, "kafka://"+broker.Bootstrap()+"?topic="+dlt+extra, kafkadlq.Options{})
		if err == nil {
			t.Cleanup(func() { src.Close() })
		}
		return src, err
	}
	refused := func(err error, want string) {
		t.Helper()
		var ce *backend.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Fatalf("want a config error naming %q, got %v", want, err)
		}
	}
	// The default state topic, written first.
	_, dlt, src, entries := seedRedrive(t, ctx)
	if res, err := src.Remove(ctx, itemsOf(entries[:1], "")); err != nil || !res[0].Removed {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	_, err := open(dlt, "&state_topic="+dlt+".elsewhere")
	refused(err, dlt+".dlqctl-state")
	if other, err := open(dlt, ""); err != nil || len(scanAll(t, ctx, other, "")) != 3 {
		t.Fatalf("the default URL again: %v", err)
	}
	// Another state topic, written first: the default is refused too.
	_, dlt2, _, entries2 := seedRedrive(t, ctx)
	custom, err := open(dlt2, "&state_topic="+dlt2+"-custom")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := custom.Remove(ctx, itemsOf(entries2[:1], "")); err != nil || !res[0].Removed {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	_, err = open(dlt2, "")
	refused(err, dlt2+"-custom")
	_, err = open(dlt2, "&state_topic="+dlt2+"-third")
	refused(err, dlt2+"-custom")
	if again, err := open(dlt2, "&state_topic="+dlt2+"-custom"); err != nil || len(scanAll(t, ctx, again, "")) != 3 {
		t.Fatalf("the recorded state topic again: %v", err)
	}
	if err := custom.GuardDestination(ctx, dlt2+"-custom"); err == nil {
		t.Fatal("the recorded state topic is a valid destination")
	}
	// A default state topic written before claims existed.
	_, dlt3, _, _ := seedRedrive(t, ctx)
	createTopic(t, ctx, dlt3+".dlqctl-state", 1, nil)
	produceManual(t, ctx, &kgo.Record{Topic: dlt3 + ".dlqctl-state", Partition: 0, Key: []byte("0:0"), Value: []byte(`{"status":"resolved"}`)})
	_, err = open(dlt3, "&state_topic="+dlt3+"-new")
	refused(err, dlt3+".dlqctl-state")
}
