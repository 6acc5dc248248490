// Package rawkafka is the benchmark's Kafka baseline: what any Go program
// reading the same dead-letter topic with plain franz-go would do at the
// least. Like bench/raw it imports nothing from dlqctl.
package rawkafka

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var sink byte

// Origin is what a loop decodes from Spring Kafka's headers.
type origin struct {
	topic, group, class, message string
	partition                    int32
	offset, timestamp            int64
}

// endOffsets lists topic's end offsets and returns, for each partition
// that holds records, the offset to read up to and a start at the log start.
func endOffsets(ctx context.Context, bootstrap, topic string) (map[int32]int64, map[int32]kgo.Offset, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, nil, err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	cl.Close()
	if err != nil {
		return nil, nil, err
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	return want, parts, nil
}

// ReadLoop reads every partition of topic from its log start to its end
// offset as it was at the start, read_committed, and per record decodes
// Spring Kafka's kafka_dlt-* headers (the 4-byte partition, the 8-byte
// offset and timestamp, the strings) and computes the SHA-256 of the value.
// It returns the number of records read.
func ReadLoop(ctx context.Context, bootstrap, topic string) (int, error) {
	want, parts, err := endOffsets(ctx, bootstrap, topic)
	if err != nil || len(want) == 0 {
		return 0, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	n := 0
	var bad error
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, err
		}
		fs.EachError(func(_ string, p int32, err error) {
			bad = errors.Join(bad, fmt.Errorf("partition %d: %w", p, err))
		})
		if bad != nil {
			return n, bad
		}
		fs.EachRecord(func(r *kgo.Record) {
			var o origin
			for _, h := range r.Headers {
				switch h.Key {
				case "kafka_dlt-original-topic":
					o.topic = string(h.Value)
				case "kafka_dlt-original-partition":
					if len(h.Value) == 4 {
						o.partition = int32(binary.BigEndian.Uint32(h.Value))
					}
				case "kafka_dlt-original-offset":
					if len(h.Value) == 8 {
						o.offset = int64(binary.BigEndian.Uint64(h.Value))
					}
				case "kafka_dlt-original-timestamp":
					if len(h.Value) == 8 {
						o.timestamp = int64(binary.BigEndian.Uint64(h.Value))
					}
				case "kafka_dlt-original-consumer-group":
					o.group = string(h.Value)
				case "kafka_dlt-exception-fqcn":
					o.class = string(h.Value)
				case "kafka_dlt-exception-message":
					o.message = string(h.Value)
				}
			}
			sum := sha256.Sum256(r.Value)
			sink ^= sum[0] ^ byte(len(o.topic)+len(o.message)+int(o.partition)+int(o.offset))
			n++
			if r.Offset >= want[r.Partition]-1 {
				delete(want, r.Partition)
			}
		})
	}
	return n, nil
}
