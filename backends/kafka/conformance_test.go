package kafkadlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/backends/kafka/kafkatest"
	"github.com/dlqctl/dlqctl/conformance"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(kafkadlq.Registration())

// TestConformance runs the shared conformance suite on Kafka, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		b := kafkatest.Start(t)
		n := 0
		return &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=1s", Refuse: func(t *testing.T, _ conformance.Fixture, dest, _ string) {
			// A topic whose records may not exceed 300 bytes: the
			// redriven record, with its headers, does (MESSAGE_TOO_LARGE).
			// At 64 bytes the broker's answer never came and the chunk
			// timed out instead (exit 1, nothing lost): docs/decisions.md.
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Bootstrap()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			limit := "300"
			resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &limit}, dest)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
		}, Missing: func(t *testing.T) string {
			return "kafka://" + b.Bootstrap() + "?topic=conf-typo-" + fmt.Sprint(time.Now().UnixNano())
		}, Fresh: func(t *testing.T) conformance.Fixture {
			n++
			base := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
			// One partition for the DLQ: records imported within one
			// millisecond keep their import order (dead-letter order
			// merges partitions by timestamp).
			for _, topic := range []string{base + "-dlq", base + "-orders"} {
				if err := kafkatest.CreateTopic(context.Background(), b.Bootstrap(), topic, 1); err != nil {
					t.Fatal(err)
				}
			}
			return conformance.Fixture{Source: "kafka://" + b.Bootstrap() + "?topic=" + base + "-dlq", Origin: base + "-orders", Self: base + "-dlq",
				Alias: "kafka://" + b.Bootstrap() + "?topic=" + base + "-dlq&state_topic=" + base + "-other-state",
				Consume: []string{"--source", "kafka://" + b.Bootstrap() + "?topic=" + base + "-orders&group=workers",
					"--dlq", base + "-dlq"}}
		}}
	})
}
