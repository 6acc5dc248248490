package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/envelope"
)

// pollWait is how long one Next waits for a message before it reports
// errIdle: the BLOCK of XREADGROUP, the sleep between inbox listings.
const pollWait = 200 * time.Millisecond

// readCount is how many entries one XREADGROUP asks for.
const readCount = 10

// errIdle: no message arrived within pollWait.
var errIdle = errors.New("no message")

// Message is one delivered message.
type Message struct {
	// ID is the backend's locator: stream entry ID or inbox file name.
	ID string
	// Envelope is the message decoded; Malformed is set when it could not
	// be (then there is no event_id to deduplicate on).
	Envelope envelope.Envelope

	fields map[string]string // redis: the entry's fields as delivered
	raw    []byte            // dir: the file's bytes
	pmsg   pulsar.Message    // pulsar: the message as delivered
	krec   *kgo.Record       // kafka: the record as delivered
	smsg   types.Message     // sqs: the message as received
	rdel   *amqp.Delivery    // rabbitmq: the delivery
	jmsg   jetstream.Msg     // nats: the message as delivered
}

// DeadLetter is what a dead-lettered message carries besides its own
// fields.
type DeadLetter struct {
	LastError string
	Attempts  int64
	At        time.Time
}

// Source delivers messages and takes them back.
type Source interface {
	// Next returns the next message, or errIdle after pollWait without one.
	Next(ctx context.Context) (Message, error)
	// Ack says the message is done: it is not delivered again.
	Ack(ctx context.Context, m Message) error
	// DeadLetter puts the message in the DLQ and acks it, in one step where
	// the backend allows (Redis, dir). On Pulsar it hands the message back
	// to the client instead (nack, or reconsume with --retry), and the
	// client dead-letters it once it has been delivered --max-deliveries
	// times.
	DeadLetter(ctx context.Context, m Message, dl DeadLetter) error
	Close() error
}

func openSource(ctx context.Context, opts Options, stderr io.Writer) (Source, error) {
	raw, dlq := opts.Source, opts.DLQ
	switch {
	case strings.HasPrefix(raw, "dir:"):
		return openDirSource(strings.TrimPrefix(raw, "dir:"))
	case strings.HasPrefix(raw, "redis://"), strings.HasPrefix(raw, "rediss://"):
		return openRedisSource(ctx, raw, dlq)
	case strings.HasPrefix(raw, "kafka://"):
		return openKafkaSource(ctx, raw, dlq)
	case strings.HasPrefix(raw, "pulsar://"), strings.HasPrefix(raw, "pulsar+ssl://"):
		return openPulsarSource(ctx, raw, pulsarOptions{
			DLQ: dlq, MaxDeliveries: opts.MaxDeliveries, RedeliveryDelay: opts.RedeliveryDelay,
			Retry: opts.Retry, Log: stderr,
		})
	case strings.HasPrefix(raw, "sqs://"):
		return openSQSSource(ctx, raw)
	case strings.HasPrefix(raw, "amqp://"), strings.HasPrefix(raw, "amqps://"):
		return openRabbitSource(raw)
	case strings.HasPrefix(raw, "nats://"):
		return openNATSSource(ctx, raw, dlq, opts.MaxDeliveries, opts.RedeliveryDelay)
	}
	return nil, usagef("--source %q: want redis://host:port/db?stream=ORIGIN&group=G, kafka://host:port?topic=ORIGIN&group=G, pulsar://host:port?topic=ORIGIN&subscription=SUB, sqs://QUEUE?region=R&endpoint=URL, amqp://user:pass@host:port/VHOST?queue=Q, nats://host:port?stream=ORIGIN&consumer=C or dir:PATH", raw)
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
		return nil, usagef("--source: %v", err)
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains([]string{"stream", "group", "consumer"}, k) {
			return nil, usagef("--source: unknown parameter %q (known: stream, group, consumer)", k)
		}
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

func (s *redisSource) Next(ctx context.Context) (Message, error) {
	for {
		if len(s.buf) == 0 {
			wasPending := s.pending != ""
			if err := s.read(ctx); err != nil {
				return Message{}, err
			}
			if len(s.buf) == 0 && !wasPending {
				return Message{}, errIdle
			}
			continue
		}
		xm := s.buf[0]
		s.buf = s.buf[1:]
		if len(xm.Values) == 0 {
			// A pending entry deleted from the stream meanwhile: there is
			// nothing left to process, only the pending entry to clear.
			if err := s.rdb.XAck(ctx, s.stream, s.group, xm.ID).Err(); err != nil {
				return Message{}, err
			}
			continue
		}
		fields := make(map[string]string, len(xm.Values))
		for k, v := range xm.Values {
			fields[k] = fmt.Sprint(v)
		}
		return Message{
			ID:       xm.ID,
			Envelope: envelope.DecodeFields(xm.ID, "redis", fields, s.names),
			fields:   fields,
		}, nil
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

func (s *redisSource) Ack(ctx context.Context, m Message) error {
	return s.rdb.XAck(ctx, s.stream, s.group, m.ID).Err()
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
func (s *redisSource) DeadLetter(ctx context.Context, m Message, dl DeadLetter) error {
	set := map[string]string{
		envelope.FieldLastError:      dl.LastError,
		envelope.FieldAttempts:       strconv.FormatInt(dl.Attempts, 10),
		envelope.FieldDeadLetteredAt: dl.At.UTC().Format(time.RFC3339Nano),
		envelope.FieldOriginStream:   s.stream,
		envelope.FieldOriginGroup:    s.group,
		envelope.FieldOriginConsumer: s.consumer,
	}
	for _, name := range s.names[envelope.FieldErrorClass] {
		if _, ok := m.fields[name]; ok {
			set[envelope.FieldErrorClass] = ""
		}
	}
	keys := make([]string, 0, len(m.fields))
	for k := range m.fields {
		if _, replaced := set[k]; !replaced {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	args := []any{m.ID, s.group, s.consumer}
	for _, k := range keys {
		args = append(args, k, m.fields[k])
	}
	for _, k := range []string{envelope.FieldLastError, envelope.FieldErrorClass, envelope.FieldAttempts,
		envelope.FieldDeadLetteredAt, envelope.FieldOriginStream, envelope.FieldOriginGroup, envelope.FieldOriginConsumer} {
		if v, ok := set[k]; ok {
			args = append(args, k, v)
		}
	}
	err := s.script.Run(ctx, s.rdb, []string{s.stream, s.dlq}, args...).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis: dead-letter %s to %s: %w", m.ID, s.dlq, err)
	}
	return nil
}

func (s *redisSource) Close() error { return s.rdb.Close() }

// Folders of a directory queue.
const (
	inboxDir = "inbox"
	doneDir  = "done"
	errorDir = "error"
	fileExt  = ".json"
)

// dlqNameTime names DLQ files: it sorts in time order, after the names of
// files dead-lettered earlier.
const dlqNameTime = "20060102T150405.000000000Z"

// dirSource consumes PATH/inbox/*.json in name order.
type dirSource struct {
	root  string
	names []string // listed, not yet delivered
}

func openDirSource(root string) (*dirSource, error) {
	if root == "" {
		return nil, usagef("--source dir: needs a path (dir:PATH)")
	}
	for _, d := range []string{inboxDir, doneDir, errorDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	return &dirSource{root: root}, nil
}

func (s *dirSource) Next(ctx context.Context) (Message, error) {
	for {
		if len(s.names) == 0 {
			if err := s.list(); err != nil {
				return Message{}, err
			}
		}
		if len(s.names) == 0 {
			select {
			case <-ctx.Done():
				return Message{}, ctx.Err()
			case <-time.After(pollWait):
			}
			return Message{}, errIdle
		}
		name := s.names[0]
		s.names = s.names[1:]
		data, err := os.ReadFile(filepath.Join(s.root, inboxDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // taken by another worker since the listing
		}
		if err != nil {
			return Message{}, err
		}
		id := strings.TrimSuffix(name, fileExt)
		return Message{ID: name, Envelope: envelope.DecodeFile(id, data), raw: data}, nil
	}
}

// list reads the inbox's file names in order. Temporary files (a writer's
// .tmp-…) start with a dot and are not messages yet.
func (s *dirSource) list() error {
	ents, err := os.ReadDir(filepath.Join(s.root, inboxDir))
	if err != nil {
		return err
	}
	for _, de := range ents {
		n := de.Name()
		if de.Type().IsRegular() && strings.HasSuffix(n, fileExt) && !strings.HasPrefix(n, ".") {
			s.names = append(s.names, n)
		}
	}
	slices.Sort(s.names)
	return nil
}

// Ack moves inbox/NAME to done/NAME (done/NAME.<ns>.json if a file of
// that name was done before: an archive is never overwritten).
func (s *dirSource) Ack(ctx context.Context, m Message) error {
	dst := filepath.Join(s.root, doneDir, m.ID)
	if _, err := os.Lstat(dst); err == nil {
		dst = filepath.Join(s.root, doneDir, fmt.Sprintf("%s.%d%s", strings.TrimSuffix(m.ID, fileExt), time.Now().UnixNano(), fileExt))
	}
	if err := os.Rename(filepath.Join(s.root, inboxDir, m.ID), dst); err != nil {
		return err
	}
	if err := syncDir(filepath.Join(s.root, doneDir)); err != nil {
		return err
	}
	return syncDir(filepath.Join(s.root, inboxDir))
}

// DeadLetter writes error/<time>-<event_id>.json, a canonical envelope
// with the dead-letter fields, then removes the inbox file. A crash between
// the two leaves the message in the inbox: it is delivered again, counted
// again, and dead-lettered again.
func (s *dirSource) DeadLetter(ctx context.Context, m Message, dl DeadLetter) error {
	e := m.Envelope
	name := dl.At.UTC().Format(dlqNameTime) + "-" + fileSafe(e.EventID)
	data := m.raw // a malformed file goes as it came: it cannot be re-encoded
	if e.Malformed == "" {
		e.ID = name
		e.Fingerprint = e.CarriedFingerprint()
		e.LastError, e.ErrorClass = dl.LastError, ""
		e.Attempts = int(dl.Attempts)
		e.DeadLetteredAt = dl.At.UTC()
		if e.Origin.Backend == "" {
			e.Origin.Backend = "dir"
		}
		b, err := envelope.MarshalIndent(e)
		if err != nil {
			return err
		}
		data = b
	}
	errDir := filepath.Join(s.root, errorDir)
	if err := writeNew(errDir, name+fileExt, data); err != nil {
		return fmt.Errorf("dead-letter %s: %w", m.ID, err)
	}
	if err := os.Remove(filepath.Join(s.root, inboxDir, m.ID)); err != nil {
		return err
	}
	return syncDir(filepath.Join(s.root, inboxDir))
}

func (s *dirSource) Close() error { return nil }

// fileSafe keeps the characters dlqctl accepts in a dir entry id.
func fileSafe(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:@+=-", c) >= 0
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > 150 {
		b = b[:150]
	}
	if len(b) == 0 {
		return "no-event-id"
	}
	return string(b)
}

// writeNew writes dir/name under a temporary name, syncs it and links it
// into place, so that a reader never sees half a file and an existing file
// is never replaced.
func writeNew(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-"+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
