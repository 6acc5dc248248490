package natsdlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// importToken replaces the wildcards of the stream's first subject to
// make the subject an import publishes to.
const importToken = "dlqctl-import"

// CopySubjects are the subjects of a copy stream that `import --init`
// creates: consumers publish their copies to dlq.<STREAM>.<anything>.
func CopySubjects(stream string) []string { return []string{"dlq." + stream + ".>"} }

// importSubject is a subject the stream takes: its first subject with
// every wildcard token replaced.
func importSubject(cfg jetstream.StreamConfig) (string, error) {
	if len(cfg.Subjects) == 0 {
		return "", fmt.Errorf("the stream has no subjects (a mirror or a sourced stream cannot be written)")
	}
	toks := strings.Split(cfg.Subjects[0], ".")
	for i, t := range toks {
		if t == "*" || t == ">" {
			toks[i] = importToken
		}
	}
	return strings.Join(toks, "."), nil
}

// validHeader: NATS headers are lines of "Name: value"; a name with a
// colon, a space or a control character, or a value with a line break,
// would break the message apart.
func validHeader(name, value string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if c <= ' ' || c == ':' || c == 0x7f {
			return false
		}
	}
	return !strings.ContainsAny(value, "\r\n")
}

// copyHeader lays an envelope out as a copy's headers: its fields under
// their first names, the origin under x-original-subject, properties as
// they are, the source id, and a Nats-Msg-Id that makes a retried import
// a duplicate.
func (s *Stream) copyHeader(e envelope.Envelope) (nats.Header, error) {
	w := envelope.NewFieldWriter(s.dec.names)
	w.Identity(e)
	w.Str(envelope.FieldPayloadVersion, e.PayloadVersion)
	w.Str(envelope.FieldContentType, e.ContentType)
	w.Str(envelope.FieldKey, e.Key)
	w.Origin(e.Origin, HeaderOriginalSubject)
	w.History(e)
	if e.PayloadEncoding != "" && e.PayloadEncoding != envelope.ClassifyPayload(e.Payload) {
		w.Put(envelope.FieldPayloadEncoding, e.PayloadEncoding)
	}
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		w.Property(k, e.Properties[k])
	}
	w.Raw(SourceIDHeader, e.ID)
	h := nats.Header{}
	for i := 0; i+1 < len(w.Pairs); i += 2 {
		k, v := w.Pairs[i], w.Pairs[i+1]
		if !validHeader(k, v) {
			return nil, fmt.Errorf("envelope %s: %q cannot be a NATS header (a name without spaces or colons, a value on one line)", e.ID, truncate(k))
		}
		if staleHeader(k) {
			continue
		}
		h.Set(k, v)
	}
	if h.Get(HeaderMsgID) == "" {
		h.Set(HeaderMsgID, "dlqctl-import:"+s.src.stream+":"+e.ID)
	}
	return h, nil
}

// Import publishes e to the stream as a copy and returns its sequence. An
// envelope whose id was imported before (or is a sequence of this stream)
// is refused with ErrExists.
func (s *Stream) Import(ctx context.Context, e envelope.Envelope) (string, error) {
	if has, err := s.Has(ctx, e.ID); err != nil {
		return "", err
	} else if has {
		return "", fmt.Errorf("envelope %s: %w in %s", e.ID, backend.ErrExists, s)
	}
	in, err := s.info(ctx)
	if err != nil {
		if errors.Is(err, backend.ErrNotFound) {
			return "", backend.Configf("%s: the stream %q does not exist (import --init creates it)", s, s.src.stream)
		}
		return "", err
	}
	subj, err := importSubject(in.Config)
	if err != nil {
		return "", backend.Configf("%s: %v", s, err)
	}
	h, err := s.copyHeader(e)
	if err != nil {
		return "", &backend.ConfigError{Err: err}
	}
	ack, err := s.publish(ctx, &nats.Msg{Subject: subj, Header: h, Data: e.Payload})
	if err != nil {
		return "", s.wrap("import "+e.ID, err)
	}
	s.mu.Lock()
	if s.sourceIDs != nil {
		s.sourceIDs[e.ID] = true
	}
	s.mu.Unlock()
	return strconv.FormatUint(ack.Sequence, 10), nil
}

// Has says whether an envelope with this id was imported (its
// dlqctl_source_id) or is the stream's entry at that sequence.
func (s *Stream) Has(ctx context.Context, id string) (bool, error) {
	s.mu.Lock()
	ids := s.sourceIDs
	s.mu.Unlock()
	if ids == nil {
		ids = map[string]bool{}
		err := s.each(ctx, "", func(m Message) error {
			ids[strconv.FormatUint(m.Seq, 10)] = true
			if v := m.Header.Get(SourceIDHeader); v != "" {
				ids[v] = true
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		s.mu.Lock()
		s.sourceIDs = ids
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sourceIDs[id], nil
}

// initStream creates the copy stream when it does not exist: file
// storage, limits retention (reading never consumes), direct gets, and the
// default 2-minute duplicate window.
func initStream(ctx context.Context, raw string, getenv func(string) string) error {
	src, err := parseURL(raw, getenv)
	if err != nil {
		return err
	}
	nc, js, err := connect(src)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, src.timeout)
	defer cancel()
	if _, err := js.Stream(ctx, src.stream); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return backend.Scrub(fmt.Errorf("%s: look up the stream: %w", src.Display(), err), src.Secrets()...)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: src.stream, Subjects: CopySubjects(src.stream), Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, AllowDirect: true,
		Description: "dead-letter copies, read by dlqctl",
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return backend.Scrub(fmt.Errorf("%s: create the stream: %w", src.Display(), err), src.Secrets()...)
	}
	return nil
}
