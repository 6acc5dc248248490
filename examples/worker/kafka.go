//go:build !no_kafka

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/envelope"
)

// The Kafka mode consumes ORIGIN as a member of consumer group G, reading
// read_committed (so a redrive's records are seen only once its
// transaction commits, and an aborted one never), and dead-letters as
// Spring Kafka's DeadLetterPublishingRecoverer does:
//
//	--source kafka://HOST:PORT[,HOST:PORT…]?topic=ORIGIN&group=G[&redriven=1]
//
// With redriven=1 it takes only the records dlqctl put back (they carry
// dlqctl_run_id) and passes over the others: a share group's source topic
// holds the records its dead letters stand for, which the share group
// consumed already.
//
// A failed delivery (--fail, or a record without an event ID) is produced
// to --dlq (default ORIGIN.DLT, Spring's naming), on the partition of the
// same number, with the record's key, value and headers plus
// kafka_dlt-original-topic, -original-partition (4-byte big-endian),
// -original-offset and -original-timestamp (8-byte big-endian),
// -original-consumer-group, -exception-fqcn and -exception-message; then
// its offset is committed. The offset is committed only after the inbox
// transaction (or the dead-letter produce) has, so a crash in between
// delivers the record again and the inbox absorbs it.

// kafkaExceptionFQCN is what the worker reports as the exception class,
// as a Spring listener's failure would.
const kafkaExceptionFQCN = "org.springframework.kafka.listener.ListenerExecutionFailedException"

// kafkaMode consumes a topic through a consumer group; --create makes the
// topic and its DLT.
func kafkaMode() mode {
	return mode{
		prefixes: []string{"kafka://"},
		usage:    "kafka://host:port?topic=ORIGIN&group=G",
		help:     "kafka://host:port?topic=ORIGIN&group=G",
		open: func(ctx context.Context, opts Options, _ io.Writer) (Source, error) {
			return openKafkaSource(ctx, opts.Source, opts.DLQ)
		},
		create: func(ctx context.Context, opts Options, stdout io.Writer) error {
			return createKafka(ctx, opts.Source, opts.DLQ, stdout)
		},
	}
}

type kafkaSource struct {
	cl    *kgo.Client
	topic string
	group string
	dlq   string
	names envelope.FieldNames
	buf   []*kgo.Record
	// redrivenOnly passes over records dlqctl did not put back.
	redrivenOnly bool
}

func openKafkaSource(ctx context.Context, raw, dlq string) (*kafkaSource, error) {
	rest := strings.TrimPrefix(raw, "kafka://")
	hosts, query, _ := strings.Cut(rest, "?")
	q, err := sourceQuery(raw, query, false, "topic", "group", "redriven")
	if err != nil {
		return nil, err
	}
	s := &kafkaSource{topic: q.Get("topic"), group: q.Get("group"), dlq: dlq, names: envelope.DefaultFieldNames(),
		redrivenOnly: q.Get("redriven") == "1"}
	if hosts == "" || s.topic == "" || s.group == "" {
		return nil, usagef("--source: kafka needs kafka://HOST:PORT?topic=ORIGIN&group=G")
	}
	if s.dlq == "" {
		s.dlq = s.topic + ".DLT"
	}
	host, _ := os.Hostname()
	s.cl, err = kgo.NewClient(
		kgo.SeedBrokers(strings.Split(hosts, ",")...),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(pollWait),
		kgo.ClientID("worker-"+host),
		// The DLT records go to the partition named on them.
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		return nil, usagef("--source: %v", err)
	}
	if err := s.ensureDLT(ctx); err != nil {
		s.cl.Close()
		return nil, err
	}
	return s, nil
}

// ensureDLT creates the DLT with as many partitions as the origin, as
// Spring's recoverer expects, unless it exists.
func (s *kafkaSource) ensureDLT(ctx context.Context) error {
	adm := kadm.NewClient(s.cl)
	md, err := adm.ListTopics(ctx, s.topic)
	if err != nil {
		return fmt.Errorf("kafka: metadata of %s: %w", s.topic, err)
	}
	d, ok := md[s.topic]
	if !ok || d.Err != nil {
		return fmt.Errorf("kafka: topic %s does not exist", s.topic)
	}
	resp, err := adm.CreateTopic(ctx, int32(len(d.Partitions)), -1, nil, s.dlq)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: create %s: %w", s.dlq, err)
	}
	return nil
}

func (s *kafkaSource) Next(ctx context.Context) (Message, Receipt, error) {
	for len(s.buf) == 0 {
		pctx, cancel := context.WithTimeout(ctx, pollWait)
		fs := s.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return Message{}, nil, ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("kafka: fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return Message{}, nil, ferr
		}
		for _, r := range fs.Records() {
			if !s.redrivenOnly || slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == backend.MarkerRunID }) {
				s.buf = append(s.buf, r)
			}
		}
		if len(s.buf) == 0 {
			return Message{}, nil, errIdle
		}
	}
	r := s.buf[0]
	s.buf = s.buf[1:]
	hs := make([]kafkadlq.KafkaHeader, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = kafkadlq.KafkaHeader{Key: h.Key, Value: h.Value}
	}
	env := kafkadlq.FromKafka(kafkadlq.KafkaRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}, envelope.EventIDSource{Kind: "property"}, s.names)
	return Message{ID: env.ID, Envelope: env}, &kafkaReceipt{s: s, id: env.ID, rec: r}, nil
}

// kafkaReceipt is one record fetched for the group.
type kafkaReceipt struct {
	s   *kafkaSource
	id  string
	rec *kgo.Record
}

// Ack commits the record's offset for the group.
func (r *kafkaReceipt) Ack(ctx context.Context) error {
	if err := r.s.cl.CommitRecords(ctx, r.rec); err != nil {
		return fmt.Errorf("kafka: commit %s/%s: %w", r.s.topic, r.id, err)
	}
	return nil
}

func be32(n int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }

// DeadLetter produces the record to the DLT with Spring's headers, then
// commits its offset. Earlier kafka_dlt-* headers (a record dead-lettered
// before and redriven) are replaced, as Spring does; so are the dlqctl
// fields of an earlier dead-lettering (an imported entry's last_error,
// attempts and dead_lettered_at), as the consumer contract asks, and a
// stale error_class is dropped: left, they would describe the new failure
// by the old one.
func (rc *kafkaReceipt) DeadLetter(ctx context.Context, dl DeadLetter) error {
	s, r := rc.s, rc.rec
	stale := map[string]bool{}
	for _, f := range []string{envelope.FieldLastError, envelope.FieldErrorClass, envelope.FieldAttempts, envelope.FieldDeadLetteredAt} {
		for _, n := range s.names[f] {
			stale[n] = true
		}
	}
	var hs []kgo.RecordHeader
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, kafkadlq.SpringPrefix) && !stale[h.Key] {
			hs = append(hs, h)
		}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: envelope.FieldLastError, Value: []byte(dl.LastError)},
		kgo.RecordHeader{Key: envelope.FieldAttempts, Value: []byte(strconv.FormatInt(dl.Attempts, 10))},
		kgo.RecordHeader{Key: envelope.FieldDeadLetteredAt, Value: []byte(dl.At.UTC().Format(time.RFC3339Nano))},
	)
	hs = append(hs,
		kgo.RecordHeader{Key: kafkadlq.SpringOriginalTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: kafkadlq.SpringOriginalPartition, Value: be32(r.Partition)},
		kgo.RecordHeader{Key: kafkadlq.SpringOriginalOffset, Value: be64(r.Offset)},
		kgo.RecordHeader{Key: kafkadlq.SpringOriginalTimestamp, Value: be64(r.Timestamp.UnixMilli())},
		kgo.RecordHeader{Key: "kafka_dlt-original-timestamp-type", Value: []byte("CreateTime")},
		kgo.RecordHeader{Key: kafkadlq.SpringOriginalGroup, Value: []byte(s.group)},
		kgo.RecordHeader{Key: kafkadlq.SpringExceptionFQCN, Value: []byte(kafkaExceptionFQCN)},
		kgo.RecordHeader{Key: kafkadlq.SpringExceptionMessage, Value: []byte(dl.LastError)},
	)
	out := &kgo.Record{Topic: s.dlq, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: dl.At}
	if err := s.cl.ProduceSync(ctx, out).FirstErr(); err != nil {
		return fmt.Errorf("kafka: dead-letter %s to %s: %w", rc.id, s.dlq, err)
	}
	return rc.Ack(ctx)
}

func (s *kafkaSource) Close() error {
	s.cl.Close()
	return nil
}

// kafkaCreatePartitions is the partition count of an origin topic that
// --create makes: more than one, so that per-partition order shows.
const kafkaCreatePartitions = 3

func createKafka(ctx context.Context, raw, dlq string, stdout io.Writer) error {
	hosts, query, _ := strings.Cut(strings.TrimPrefix(raw, "kafka://"), "?")
	q, err := url.ParseQuery(query)
	if err != nil || hosts == "" || q.Get("topic") == "" {
		return usagef("--source: --create needs kafka://HOST:PORT?topic=ORIGIN")
	}
	topic := q.Get("topic")
	if dlq == "" {
		dlq = topic + ".DLT"
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(hosts, ",")...))
	if err != nil {
		return usagef("--source: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	partitions := int32(kafkaCreatePartitions)
	if err := createTopic(ctx, adm, topic, partitions, stdout); err != nil {
		return err
	}
	// The DLT has the origin's partition count, as Spring's recoverer
	// expects, whichever made the origin.
	md, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	if d, ok := md[topic]; ok && d.Err == nil {
		partitions = int32(len(d.Partitions))
	}
	return createTopic(ctx, adm, dlq, partitions, stdout)
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, stdout io.Writer) error {
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		fmt.Fprintf(stdout, "topic %s exists\n", topic)
		return nil
	case err != nil:
		return fmt.Errorf("kafka: create %s: %w", topic, err)
	}
	fmt.Fprintf(stdout, "created topic %s (%d partitions)\n", topic, partitions)
	return nil
}
