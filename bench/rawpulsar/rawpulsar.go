// Package rawpulsar is the benchmark's Pulsar baseline: what any Go program
// reading the same DLQ topic with the plain pulsar-client-go would do at the
// least. It is apart from bench/raw so that bench/rawredis does not link
// the Pulsar client; like bench/raw it imports nothing from dlqctl.
package rawpulsar

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// NewClient is a plain client with defaults and its logs discarded (as
// dlqctl discards them).
func NewClient(serviceURL string) (pulsar.Client, error) {
	return pulsar.NewClient(pulsar.ClientOptions{URL: serviceURL, Logger: plog.DefaultNopLogger()})
}

var sink byte

// ReadLoop reads topic from the earliest message with a Reader (default
// receiver queue) up to the last message the topic had when it started
// (GetLastMessageID), and per message json.Unmarshals the payload into a
// map and computes its SHA-256. It returns the number of messages read.
func ReadLoop(ctx context.Context, c pulsar.Client, topic string) (int, error) {
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	last, err := r.GetLastMessageID()
	if err != nil {
		return 0, err
	}
	if last.EntryID() < 0 {
		return 0, nil
	}
	n := 0
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return n, err
		}
		p := m.Payload()
		var doc map[string]any
		if err := json.Unmarshal(p, &doc); err != nil {
			return n, fmt.Errorf("message %v: payload: %v", m.ID(), err)
		}
		sum := sha256.Sum256(p)
		sink ^= sum[0]
		n++
		id := m.ID()
		if id.LedgerID() == last.LedgerID() && id.EntryID() == last.EntryID() &&
			(id.BatchSize() <= 1 || id.BatchIdx() >= id.BatchSize()-1) {
			return n, nil
		}
	}
}
