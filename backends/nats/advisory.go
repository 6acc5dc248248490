package natsdlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Shape (b): a stream that captures the server's advisories for a
// consumer's dead letters. Each advisory is an entry; the message it is
// about is read from its stream by stream_seq.
const (
	subjMaxDeliveries = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
	subjTerminated    = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED"
	typeMaxDeliveries = "io.nats.jetstream.advisory.v1.max_deliver"
	typeTerminated    = "io.nats.jetstream.advisory.v1.terminated"
)

// AdvisoryStream is the name of the advisory stream `dlq init` makes for
// a stream's consumer.
func AdvisoryStream(stream, consumer string) string { return "DLQ_" + stream + "_" + consumer }

// AdvisorySubjects are the subjects of a consumer's dead-letter advisories.
func AdvisorySubjects(stream, consumer string) []string {
	return []string{subjMaxDeliveries + "." + stream + "." + consumer, subjTerminated + "." + stream + "." + consumer}
}

// advisory is what a MAX_DELIVERIES or MSG_TERMINATED advisory carries.
type advisory struct {
	Type       string    `json:"type"`
	Time       time.Time `json:"timestamp"`
	Stream     string    `json:"stream"`
	Consumer   string    `json:"consumer"`
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries uint64    `json:"deliveries"`
	Reason     string    `json:"reason"`
}

// errNotDeadLetter: an advisory of another kind (a wildcard advisory
// stream also catches naks and consumer actions); it is no entry.
var errNotDeadLetter = errors.New("not a dead-letter advisory")

// parseAdvisory reads an advisory; errNotDeadLetter for other kinds, a
// reason for one of an unexpected shape.
func parseAdvisory(data []byte) (advisory, error) {
	var a advisory
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("advisory is not the JSON the server writes: %v", err)
	}
	switch a.Type {
	case typeMaxDeliveries, typeTerminated:
	default:
		return a, errNotDeadLetter
	}
	if a.Stream == "" || a.StreamSeq == 0 {
		return a, fmt.Errorf("advisory of an unexpected shape: no stream or stream_seq")
	}
	return a, nil
}

// clockSkew is how much later than its advisory a message may have been
// stored and still be the one the advisory is about: the message is stored
// before it is delivered and the advisory follows the last delivery, so
// only clocks that disagree (the stream's and the consumer's leaders in a
// cluster) can make it look later.
const clockSkew = time.Second

// target is what an advisory entry resolves to: the message it is about,
// or why it cannot be read.
type target struct {
	a advisory
	// created is when the advisory's stream was created (zero when it is
	// gone): with the sequence it names the message, which a stream
	// deleted and made again numbers afresh.
	created time.Time
	orig    Message
	// why is set when the message cannot be read: the advisory is of an
	// unexpected shape, or its message is gone (then gone is true).
	why  string
	gone bool
}

// key names the message a target is about across incarnations of its
// stream ("" when its stream is gone or the advisory unreadable): two
// advisories with one key are about one message.
func (tg target) key() string {
	if tg.created.IsZero() {
		return ""
	}
	return tg.a.Stream + "\x00" + strconv.FormatInt(tg.created.UnixNano(), 10) + "\x00" + strconv.FormatUint(tg.a.StreamSeq, 10)
}

// resolve reads the message the advisory m is about. ok is false for
// advisories of other kinds. A message is the one an advisory is about only
// when its stream was not made again after the advisory and it was not
// stored after it: otherwise the sequence was reused (the stream deleted
// and made again, or restored from an older snapshot), and the message the
// advisory is about is gone.
func (s *Stream) resolve(ctx context.Context, m Message) (tg target, ok bool, err error) {
	a, perr := parseAdvisory(m.Data)
	tg.a = a
	switch {
	case errors.Is(perr, errNotDeadLetter):
		return tg, false, nil
	case perr != nil:
		tg.why = perr.Error()
		return tg, true, nil
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	st, err := s.js.Stream(rctx, a.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		tg.why, tg.gone = fmt.Sprintf("the stream %q no longer exists", a.Stream), true
		return tg, true, nil
	}
	if err != nil {
		return tg, true, s.wrap("look up the stream "+a.Stream, err)
	}
	tg.created = st.CachedInfo().Created
	if !a.Time.IsZero() && tg.created.After(a.Time) {
		tg.why, tg.gone = fmt.Sprintf("the stream %q was re-created (%s) after this advisory (%s): its message %d is gone, and the sequence names another message now",
			a.Stream, tg.created.UTC().Format(time.RFC3339Nano), a.Time.UTC().Format(time.RFC3339Nano), a.StreamSeq), true
		return tg, true, nil
	}
	sm, err := st.GetMsg(rctx, a.StreamSeq)
	if isNoMessage(err) {
		tg.why, tg.gone = fmt.Sprintf("message %d of %s is gone (removed by the stream's limits, a purge, or a +TERM on a WorkQueue or Interest stream)", a.StreamSeq, a.Stream), true
		return tg, true, nil
	}
	if err != nil {
		return tg, true, s.wrap(fmt.Sprintf("read message %d of %s", a.StreamSeq, a.Stream), err)
	}
	if !a.Time.IsZero() && sm.Time.After(a.Time.Add(clockSkew)) {
		tg.why, tg.gone = fmt.Sprintf("message %d of %s was stored (%s) after this advisory (%s): the stream was re-created or restored, and its message %d is gone",
			a.StreamSeq, a.Stream, sm.Time.UTC().Format(time.RFC3339Nano), a.Time.UTC().Format(time.RFC3339Nano), a.StreamSeq), true
		return tg, true, nil
	}
	tg.orig = Message{Seq: sm.Sequence, Subject: sm.Subject, Header: withoutServerHeaders(sm.Header), Data: sm.Data, Time: sm.Time}
	return tg, true, nil
}

// decodeAdvisory maps an advisory entry to the envelope of the message it
// is about: id is the advisory's sequence; origin the message's subject
// and the consumer; attempts its deliveries; last_error the termination
// reason (a last_error header wins), or what happened when the advisory
// gives none. An advisory that cannot be read, or whose message is gone,
// is malformed with the reason. ok is false for advisories of other kinds.
func (s *Stream) decodeAdvisory(ctx context.Context, m Message, lean bool) (env envelope.Envelope, tg target, ok bool, err error) {
	id := strconv.FormatUint(m.Seq, 10)
	tg, ok, err = s.resolve(ctx, m)
	if !ok || err != nil {
		return envelope.Envelope{}, tg, ok, err
	}
	a := tg.a
	if tg.why != "" {
		return envelope.Envelope{ID: id, Origin: envelope.Origin{Backend: Name, Topic: a.Stream, Subscription: a.Consumer},
			Attempts: int(a.Deliveries), DeadLetteredAt: a.Time.UTC(), Malformed: tg.why, Raw: rawCopy(m)}, tg, true, nil
	}
	orig := tg.orig
	env = s.dec.decode(orig, lean)
	env.ID = id
	if env.Origin.Topic == "" {
		env.Origin.Topic = orig.Subject
	}
	env.Origin.Subscription = a.Consumer
	if env.Attempts == 0 {
		env.Attempts = int(a.Deliveries)
	}
	if _, has := orig.Header[s.dec.names[envelope.FieldDeadLetteredAt][0]]; !has && !a.Time.IsZero() {
		env.DeadLetteredAt = a.Time.UTC()
	}
	if env.LastError == "" {
		switch {
		case a.Reason != "":
			env.LastError = a.Reason
		case a.Type == typeMaxDeliveries:
			env.LastError = fmt.Sprintf("max deliveries (%d) reached", a.Deliveries)
		default:
			env.LastError = "terminated by the consumer (+TERM without a reason)"
		}
	}
	if !lean && env.Malformed == "" {
		if env.Properties == nil {
			env.Properties = map[string]string{}
		}
		env.Properties["nats_stream"] = a.Stream
		env.Properties["nats_stream_seq"] = strconv.FormatUint(a.StreamSeq, 10)
	}
	return env, tg, true, nil
}

// initAdvisoryStream creates the advisory stream for raw's stream and
// consumer (dlq init).
func initAdvisoryStream(ctx context.Context, raw string, opts backend.OpenOptions, dryRun bool) (backend.DLQInit, error) {
	src, err := parseURL(raw, opts.Getenv)
	if err != nil {
		return backend.DLQInit{}, err
	}
	if src.consumer == "" {
		return backend.DLQInit{}, backend.Configf("nats source %s: dlq init needs &consumer=C (the consumer whose dead letters to capture)", src.Display())
	}
	name := AdvisoryStream(src.stream, src.consumer)
	res := backend.DLQInit{Stream: name, Subjects: AdvisorySubjects(src.stream, src.consumer)}
	nc, js, err := connect(src)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, src.timeout)
	defer cancel()
	scrub := func(err error) error { return backend.Scrub(err, src.Secrets()...) }
	if _, err := js.Stream(ctx, src.stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		return res, backend.Configf("nats source %s: the stream %q does not exist", src.Display(), src.stream)
	} else if err != nil {
		return res, scrub(fmt.Errorf("%s: look up the stream: %w", src.Display(), err))
	}
	if _, err := js.Stream(ctx, name); err == nil {
		res.Source = advisorySource(src, name)
		return res, nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return res, scrub(fmt.Errorf("%s: look up the stream %s: %w", src.Display(), name, err))
	}
	res.Created, res.Source = true, advisorySource(src, name)
	if dryRun {
		return res, nil
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: res.Subjects, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		AllowDirect: true, Description: fmt.Sprintf("dead-letter advisories of %s/%s, read by dlqctl", src.stream, src.consumer),
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		res.Created = false
		return res, nil
	}
	if err != nil {
		return res, scrub(fmt.Errorf("%s: create the stream %s: %w", src.Display(), name, err))
	}
	return res, nil
}

// advisorySource is the URL that reads the advisory stream.
func advisorySource(src sourceURL, name string) string {
	d := src.Display()
	base, _, _ := cutQuery(d)
	return base + "?stream=" + name + "&advisories=1"
}

func cutQuery(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '?' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
