package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Import produces e to the DLQ topic and returns its locator. The payload
// is the value and the key the record key (partitioned as Kafka's default
// partitioner does); the envelope's fields become headers under the first
// of their names (origin.topic as origin_stream), then its properties;
// dlqctl_source_id keeps e.ID. An id already present is refused with
// backend.ErrExists.
func (t *Topic) Import(ctx context.Context, e envelope.Envelope) (string, error) {
	if t.missing {
		// Produced to, it fails with a bare UNKNOWN_TOPIC_OR_PARTITION.
		return "", backend.Configf("%s: topic %q does not exist, and import does not create it: create it first, with as many partitions as its origin (kafka-topics.sh --create --topic %s --partitions N; for a rehearsal, the reference worker: go run ./examples/worker --source 'kafka://HOST:PORT?topic=ORIGIN' --create makes ORIGIN and ORIGIN.DLT)", t, t.src.topic, t.src.topic)
	}
	if e.ID != "" {
		has, err := t.Has(ctx, e.ID)
		if err != nil {
			return "", err
		}
		if has {
			return "", fmt.Errorf("import %s: %w in %s", e.ID, backend.ErrExists, t)
		}
	}
	r := t.importRecord(e)
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	results, err := produceSync(rctx, t.cl, []*kgo.Record{r})
	var res *kgo.Record
	if err == nil {
		res, err = results.First()
	}
	if err != nil {
		return "", t.connErr(ctx, "import "+e.ID, err)
	}
	t.mu.Lock()
	if t.imported != nil && e.ID != "" {
		t.imported[e.ID] = true
	}
	t.mu.Unlock()
	return KafkaID(res.Partition, res.Offset), nil
}

// Has reports whether id is the dlqctl_source_id of an entry (one scan on
// first call, then kept for the life of the Topic) or an entry's locator.
func (t *Topic) Has(ctx context.Context, id string) (bool, error) {
	t.mu.Lock()
	ids := t.imported
	t.mu.Unlock()
	if ids == nil {
		ids = map[string]bool{}
		st, err := t.loadState(ctx, true)
		if err != nil {
			return false, err
		}
		err = t.scanRecords(ctx, cursor{}, st, func(r *kgo.Record) error {
			for _, h := range r.Headers {
				if h.Key == envelope.ImportedFromProperty {
					ids[string(h.Value)] = true
				}
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		t.mu.Lock()
		if t.imported == nil {
			t.imported = ids
		}
		t.mu.Unlock()
	}
	t.mu.Lock()
	found := t.imported[id]
	t.mu.Unlock()
	if found {
		return true, nil
	}
	if _, _, ok := ParseKafkaID(id); !ok {
		return false, nil
	}
	_, err := t.Get(ctx, id)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, backend.ErrNotFound):
		return false, nil
	}
	return false, err
}

// importRecord lays e out as a DLQ record (see Import).
func (t *Topic) importRecord(e envelope.Envelope) *kgo.Record {
	w := envelope.NewFieldWriter(t.names)
	payload, _ := envelope.ImportPayload(e)
	w.Identity(e)
	if e.PayloadEncoding != "" && e.PayloadEncoding != envelope.ClassifyPayload(payload) {
		w.Put(envelope.FieldPayloadEncoding, e.PayloadEncoding)
	}
	w.Str(envelope.FieldPayloadVersion, e.PayloadVersion)
	w.Str(envelope.FieldContentType, e.ContentType)
	w.Origin(e.Origin, "")
	w.History(e)
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		if DeadLetterHeader(k) {
			// Decoded forms of dead-lettering headers (numbers as text)
			// would not decode back; the fields above carry what they said.
			continue
		}
		v, err := e.PropertyBytes(k)
		if err != nil {
			v = []byte(e.Properties[k]) // a malformed entry: as it reads
		}
		w.Property(k, string(v))
	}
	if e.ID != "" {
		w.Raw(envelope.ImportedFromProperty, e.ID)
	}
	r := &kgo.Record{Topic: t.src.topic, Value: payload}
	if e.Key != "" {
		if k, err := e.KeyBytes(); err == nil {
			r.Key = k
		} else {
			r.Key = []byte(e.Key)
		}
	}
	for i := 0; i+1 < len(w.Pairs); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: w.Pairs[i], Value: []byte(w.Pairs[i+1])})
	}
	return r
}
