//go:build !no_redis

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dlqctl/dlqctl/envelope"
)

// redisMode consumes a stream through a consumer group and dead-letters
// to a DLQ stream on the same server.
func redisMode() mode {
	return mode{
		prefixes: []string{"redis://", "rediss://"},
		usage:    "redis://host:port/db?stream=ORIGIN&group=G",
		help:     "redis://host:port/db?stream=ORIGIN&group=G[&consumer=C]",
		open: func(ctx context.Context, opts Options, _ io.Writer) (Source, error) {
			return openRedisSource(ctx, opts.Source, opts.DLQ)
		},
	}
}

// redisSource reads a stream through a consumer group.
type redisSource struct {
	rdb      *redis.Client
	stream   string
	group    string
	consumer string
	dlq      string
	names    envelope.FieldNames
	script   *redis.Script // deadLetterScript

	// pending is the cursor over this consumer's own pending entries,
	// read first so that what a crash left unacked is delivered again;
	// "" once they are all read.
	pending string
	buf     []redis.XMessage
}

func openRedisSource(ctx context.Context, raw, dlq string) (*redisSource, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usagef("--source %s: not a valid URL", sourceURL(raw))
	}
	q, err := sourceQuery(raw, u.RawQuery, u.User != nil, "stream", "group", "consumer")
	if err != nil {
		return nil, err
	}
	s := &redisSource{
		stream:   q.Get("stream"),
		group:    q.Get("group"),
		consumer: q.Get("consumer"),
		dlq:      dlq,
		names:    envelope.DefaultFieldNames(),
		script:   redis.NewScript(deadLetterScript),
		pending:  "0",
	}
	if s.stream == "" || s.group == "" {
		return nil, usagef("--source: redis needs ?stream=ORIGIN&group=G")
	}
	if s.consumer == "" {
		// Stable across restarts: a restarted worker must find its own
		// pending entries again.
		host, _ := os.Hostname()
		s.consumer = "worker-" + host
	}
	if s.dlq == "" {
		s.dlq = s.stream + "-dlq"
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "6379"
	}
	db := 0
	if p := strings.Trim(u.Path, "/"); p != "" {
		if db, err = strconv.Atoi(p); err != nil {
			return nil, usagef("--source: database %q is not a number", p)
		}
	}
	opts := &redis.Options{
		Addr:                     net.JoinHostPort(host, port),
		DB:                       db,
		Username:                 u.User.Username(),
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	opts.Password, _ = u.User.Password()
	if u.Scheme == "rediss" {
		opts.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	s.rdb = redis.NewClient(opts)
	err = s.rdb.XGroupCreateMkStream(ctx, s.stream, s.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		s.rdb.Close()
		return nil, fmt.Errorf("redis %s: create group %s on %s: %w", opts.Addr, s.group, s.stream, err)
	}
	return s, nil
}

func (s *redisSource) Next(ctx context.Context) (Message, Receipt, error) {
	for {
		if len(s.buf) == 0 {
			wasPending := s.pending != ""
			if err := s.read(ctx); err != nil {
				return Message{}, nil, err
			}
			if len(s.buf) == 0 && !wasPending {
				return Message{}, nil, errIdle
			}
			continue
		}
		xm := s.buf[0]
		s.buf = s.buf[1:]
		if len(xm.Values) == 0 {
			// A pending entry deleted from the stream meanwhile: there is
			// nothing left to process, only the pending entry to clear.
			if err := s.rdb.XAck(ctx, s.stream, s.group, xm.ID).Err(); err != nil {
				return Message{}, nil, err
			}
			continue
		}
		fields := make(map[string]string, len(xm.Values))
		for k, v := range xm.Values {
			fields[k] = fmt.Sprint(v)
		}
		m := Message{ID: xm.ID, Envelope: envelope.DecodeFields(xm.ID, "redis", fields, s.names)}
		return m, &redisReceipt{s: s, id: xm.ID, fields: fields}, nil
	}
}

// read fills buf: first from this consumer's pending entries (id 0, then
// after the last one read), then new entries (">", blocking pollWait).
func (s *redisSource) read(ctx context.Context) error {
	args := &redis.XReadGroupArgs{Group: s.group, Consumer: s.consumer, Count: readCount, Block: pollWait}
	if s.pending != "" {
		args.Streams, args.Block = []string{s.stream, s.pending}, -1
	} else {
		args.Streams = []string{s.stream, ">"}
	}
	streams, err := s.rdb.XReadGroup(ctx, args).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redis: XREADGROUP %s %s: %w", s.stream, s.group, err)
	}
	var got []redis.XMessage
	for _, st := range streams {
		got = append(got, st.Messages...)
	}
	if s.pending != "" {
		if len(got) == 0 {
			s.pending = ""
		} else {
			s.pending = got[len(got)-1].ID
		}
	}
	s.buf = append(s.buf, got...)
	return nil
}

// redisReceipt is one entry read through the group, pending for this
// consumer until it is acked or dead-lettered.
type redisReceipt struct {
	s      *redisSource
	id     string
	fields map[string]string // the entry's fields as delivered
}

func (r *redisReceipt) Ack(ctx context.Context) error {
	return r.s.rdb.XAck(ctx, r.s.stream, r.s.group, r.id).Err()
}

// deadLetterScript adds the entry to the DLQ and acks it in the origin
// group, atomically, and only while it is still pending for this consumer:
// run twice, or after another consumer claimed the entry, it writes
// nothing.
//
//	KEYS[1]  the origin stream
//	KEYS[2]  the DLQ stream
//	ARGV     entry id, group, consumer, then the DLQ entry's fields as
//	         name/value pairs
//
// Replies the DLQ entry's id, or false when the entry was not pending:
// then its new owner processes it, and this worker has nothing to undo (its
// transaction recorded an attempt and no effect).
const deadLetterScript = `
local id, group, consumer = ARGV[1], ARGV[2], ARGV[3]
if #redis.call('XPENDING', KEYS[1], group, id, id, 1, consumer) == 0 then return false end
local dlqID = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
redis.call('XACK', KEYS[1], group, id)
return dlqID
`

// DeadLetter writes the entry's own fields (markers, redrive_count and
// all) with the dead-letter fields replacing any earlier ones. A stale
// error_class from an earlier trip through the DLQ is blanked: it would
// make dlqctl categorize the new failure by the old one.
func (r *redisReceipt) DeadLetter(ctx context.Context, dl DeadLetter) error {
	s := r.s
	set := map[string]string{
		envelope.FieldLastError:      dl.LastError,
		envelope.FieldAttempts:       strconv.FormatInt(dl.Attempts, 10),
		envelope.FieldDeadLetteredAt: dl.At.UTC().Format(time.RFC3339Nano),
		envelope.FieldOriginStream:   s.stream,
		envelope.FieldOriginGroup:    s.group,
		envelope.FieldOriginConsumer: s.consumer,
	}
	for _, name := range s.names[envelope.FieldErrorClass] {
		if _, ok := r.fields[name]; ok {
			set[envelope.FieldErrorClass] = ""
		}
	}
	keys := make([]string, 0, len(r.fields))
	for k := range r.fields {
		if _, replaced := set[k]; !replaced {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	args := []any{r.id, s.group, s.consumer}
	for _, k := range keys {
		args = append(args, k, r.fields[k])
	}
	for _, k := range []string{envelope.FieldLastError, envelope.FieldErrorClass, envelope.FieldAttempts,
		envelope.FieldDeadLetteredAt, envelope.FieldOriginStream, envelope.FieldOriginGroup, envelope.FieldOriginConsumer} {
		if v, ok := set[k]; ok {
			args = append(args, k, v)
		}
	}
	err := s.script.Run(ctx, s.rdb, []string{s.stream, s.dlq}, args...).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis: dead-letter %s to %s: %w", r.id, s.dlq, err)
	}
	return nil
}

func (s *redisSource) Close() error { return s.rdb.Close() }
