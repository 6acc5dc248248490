package natsdlq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Atomic is false: the publish to the subject and the delete from the DLQ
// stream are two steps; the journal covers the gap.
func (s *Stream) Atomic() bool { return false }

// DefaultDest is the original subject.
func (s *Stream) DefaultDest(origin string) string { return origin }

// RedriveMsgID is the Nats-Msg-Id of a redrive: of the message at sequence
// seq of stream, stored at stored (the copy in the DLQ stream; in advisory
// shape, the original in its stream), with its event ID and fingerprint, to
// the subject dest. Only a resend of that very message to that subject (a
// resume, or a new plan after a crash) carries it again, and the
// destination drops that inside its duplicate window. It never matches the
// producer's own ID (the prefix); and a stream deleted and made again, whose
// sequences start at 1 again, stores its messages at other times, so the
// redrive of a later dead letter is never taken for that of an earlier one
// at the same sequence.
func RedriveMsgID(stream string, seq uint64, stored time.Time, eventID, fingerprint, dest string) string {
	h := sha256.Sum256([]byte(strings.Join([]string{strconv.FormatInt(stored.UnixNano(), 10), eventID, strings.ToLower(fingerprint), dest}, "\x00")))
	return "dlqctl-redrive:" + stream + ":" + strconv.FormatUint(seq, 10) + ":" + hex.EncodeToString(h[:8])
}

// prefetchWorkers is how many copies a Publish reads at once: each read is
// one round trip, and reading them in parallel keeps the publishes, which
// must go one after another, from waiting on them.
const prefetchWorkers = 8

// fetchAll reads the copies of items in parallel; a copy that is gone has
// its error wrapping backend.ErrNotFound.
func (s *Stream) fetchAll(ctx context.Context, items []backend.MoveItem) ([]Message, []error) {
	msgs := make([]Message, len(items))
	errs := make([]error, len(items))
	inParallel(len(items), prefetchWorkers, func(i int) {
		seq, ok := parseID(items[i].ID)
		if !ok {
			errs[i] = fmt.Errorf("%q is no stream sequence: %w", items[i].ID, backend.ErrNotFound)
			return
		}
		msgs[i], errs[i] = s.get(ctx, seq)
	})
	return msgs, errs
}

// inParallel calls fn for 0…n-1 on up to workers goroutines and returns
// when every call has.
func inParallel(n, workers int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// Publish sends each item's copy to item.Dest, one after another, and
// waits for the stream's ack of each: data and headers as the copy has
// them, without the publish expectations (Nats-Expected-*) and the
// server's headers, with the event_id header set (a copy whose event ID
// was its Nats-Msg-Id keeps it so), redrive_count one higher, the markers,
// and RedriveMsgID as Nats-Msg-Id.
//
// An ack that says duplicate is a resend the stream dropped: the stream
// holds this redrive already, and DestID names it. The message stored is
// read back: when it is the redrive of another entry (two advisories about
// one message), this entry is that message's second pointer (below); when
// it is no redrive of this entry at all, the item fails and its copy stays.
//
// Per item, nothing is sent and Err is set when the copy is gone
// (ErrNotFound), its fingerprint is not the planned one (ErrChanged), it
// has no destination, or an earlier item for the same destination failed
// (so that a later entry never overtakes it). In advisory shape, an
// advisory about a message that another entry moved in this process is
// removed and nothing is sent (ErrSameMessage). A lost connection returns
// an error: the outcome of the item in flight is then unknown.
func (s *Stream) Publish(ctx context.Context, items []backend.MoveItem, mk backend.Markers) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	msgs, errs := s.fetchAll(ctx, items)
	failed := map[string]bool{}
	for i, it := range items {
		if errs[i] != nil {
			if !errors.Is(errs[i], backend.ErrNotFound) {
				return nil, errs[i]
			}
			results[i].Err = errs[i]
			continue
		}
		mv, err := s.prepare(ctx, it, msgs[i])
		if err != nil {
			return nil, err
		}
		if mv.err != nil {
			results[i].Err = mv.err
			continue
		}
		if !strings.EqualFold(mv.env.Fingerprint, it.Fingerprint) {
			results[i].Err = fmt.Errorf("message %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, mv.env.Fingerprint)
			continue
		}
		switch {
		case it.Dest == "":
			results[i].Err = fmt.Errorf("move %s: no destination subject (no original-subject header; give --to)", it.ID)
			continue
		case failed[it.Dest]:
			results[i].Err = fmt.Errorf("move %s: not sent: an earlier entry for %s failed", it.ID, it.Dest)
			continue
		}
		res, refused, err := s.send(ctx, it, mv, mk)
		if err != nil {
			return nil, err
		}
		if refused {
			failed[it.Dest] = true
		}
		results[i] = res
	}
	return results, nil
}

// move is one item's publish: the message sent and its envelope, the
// stream it is in, and (advisory shape) its key.
type move struct {
	msg    Message
	env    envelope.Envelope
	stream string
	tg     target
	// err is the item's own failure: nothing is sent.
	err error
}

// prepare reads what item it sends: the copy m, or the message the
// advisory m is about.
func (s *Stream) prepare(ctx context.Context, it backend.MoveItem, m Message) (move, error) {
	if !s.src.advisories {
		return move{msg: m, env: s.dec.decode(m, true), stream: s.src.stream}, nil
	}
	e, tg, ok, err := s.decodeAdvisory(ctx, m, true)
	switch {
	case err != nil:
		return move{}, err
	case !ok:
		return move{err: fmt.Errorf("message %s is no dead-letter advisory: %w", it.ID, backend.ErrNotFound)}, nil
	}
	if by := s.movedBy(tg.key()); by != "" && by != it.ID {
		itemErr, err := s.sameMessage(ctx, it, tg.a, by)
		return move{err: itemErr}, err
	}
	if e.Malformed != "" {
		return move{err: fmt.Errorf("move %s: %s", it.ID, e.Malformed)}, nil
	}
	return move{msg: tg.orig, env: e, stream: tg.a.Stream, tg: tg}, nil
}

// send publishes one prepared move and reads its ack; refused says the
// item failed so that later items for its destination must wait.
func (s *Stream) send(ctx context.Context, it backend.MoveItem, mv move, mk backend.Markers) (res backend.MoveResult, refused bool, err error) {
	id := RedriveMsgID(mv.stream, mv.msg.Seq, mv.msg.Time, mv.env.EventID, mv.env.Fingerprint, it.Dest)
	out := &nats.Msg{Subject: it.Dest, Data: mv.msg.Data, Header: s.redriveHeader(mv.msg.Header, mv.env, it, mk, id)}
	ack, err := s.publish(ctx, out)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			// The server answered, or no stream listens on the
			// subject: nothing was stored.
			res.Err = fmt.Errorf("move %s to %s: %v", it.ID, it.Dest, backend.Scrub(err, s.src.Secrets()...))
			return res, true, nil
		}
		return res, false, s.wrap(fmt.Sprintf("publish message %s to %s", it.ID, it.Dest), err)
	}
	stored := ack.Stream + ":" + strconv.FormatUint(ack.Sequence, 10)
	if ack.Duplicate {
		by, err := s.duplicateOf(ctx, ack, id)
		if err != nil {
			return res, false, err
		}
		switch {
		case by != "" && by != it.ID && s.src.advisories && mv.tg.key() != "":
			s.setMovedBy(mv.tg.key(), by)
			res.Err, err = s.sameMessage(ctx, it, mv.tg.a, by)
			return res, false, err
		case by != "" && by != it.ID:
			res.Err = fmt.Errorf("move %s to %s: the stream answered that it holds this redrive already (%s), but the message there is not the redrive of this entry (%s): nothing was stored, and the entry stays in the DLQ", it.ID, it.Dest, stored, by)
			return res, true, nil
		}
	}
	s.setMovedBy(mv.tg.key(), it.ID)
	s.setSent(it.ID, mv)
	res.DestID = stored
	return res, false, nil
}

// duplicateOf reads the message that a publish acked as a duplicate was
// dropped for, and says whose redrive it is: the DLQ entry its
// dlqctl_redriven_from names, "" when it cannot be read any more (consumed
// from a WorkQueue stream, removed by its limits: its ID names this dead
// letter alone, so it is taken as this move's), or a description when it
// carries another Nats-Msg-Id.
func (s *Stream) duplicateOf(ctx context.Context, ack *jetstream.PubAck, id string) (string, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	st, err := s.js.Stream(rctx, ack.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", nil
	}
	if err != nil {
		return "", s.wrap("look up the stream "+ack.Stream, err)
	}
	m, err := st.GetMsg(rctx, ack.Sequence)
	if isNoMessage(err) {
		return "", nil
	}
	if err != nil {
		return "", s.wrap(fmt.Sprintf("read message %d of %s", ack.Sequence, ack.Stream), err)
	}
	if got := m.Header.Get(HeaderMsgID); got != id {
		return fmt.Sprintf("a message whose Nats-Msg-Id is %q", truncate(got)), nil
	}
	return m.Header.Get(backend.MarkerRedrivenFrom), nil
}

// sameMessage removes the advisory of item, whose message the entry by
// moved (advisory shape: two advisories about one message): the message is
// on its destination, so this second pointer to it goes, and nothing is
// sent. The item's result wraps ErrSameMessage (and ErrNotFound: nothing
// was published); err is a failure to reach the server.
func (s *Stream) sameMessage(ctx context.Context, it backend.MoveItem, a advisory, by string) (itemErr, err error) {
	seq, _ := parseID(it.ID)
	st, err := s.handle(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := s.reqCtx(ctx)
	err = st.DeleteMsg(rctx, seq)
	cancel()
	var apiErr *jetstream.APIError
	switch {
	case err == nil, isNoMessage(err):
		return &sameMessageError{id: it.ID, by: by, stream: a.Stream, seq: a.StreamSeq}, nil
	case errors.As(err, &apiErr), errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful):
		return fmt.Errorf("advisory %s is about message %d of %s, which the entry %s moved; removing it: %v", it.ID, a.StreamSeq, a.Stream, by, backend.Scrub(err, s.src.Secrets()...)), nil
	}
	return nil, s.wrap("delete message "+it.ID, err)
}

type sameMessageError struct {
	id, by, stream string
	seq            uint64
}

func (e *sameMessageError) Error() string {
	return fmt.Sprintf("advisory %s is about message %d of %s, which the entry %s moved: nothing published, advisory removed", e.id, e.seq, e.stream, e.by)
}

func (e *sameMessageError) Is(target error) bool {
	return target == backend.ErrSameMessage || target == backend.ErrNotFound
}

// movedBy is the entry that moved (published, or removed) the message of
// key in this process, "" for none.
func (s *Stream) movedBy(key string) string {
	if key == "" {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moved[key]
}

func (s *Stream) setMovedBy(key, id string) {
	if key == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.moved == nil {
		s.moved = map[string]string{}
	}
	if _, ok := s.moved[key]; !ok {
		s.moved[key] = id
	}
}

// setSent remembers what Publish sent for the entry id, so that Remove
// knows the entry there is the planned one without reading it again.
func (s *Stream) setSent(id string, mv move) {
	seq, _ := parseID(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = map[uint64]target{}
	}
	s.sent[seq] = mv.tg
}

// takeSent returns and forgets what Publish sent for seq.
func (s *Stream) takeSent(seq uint64) (target, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tg, ok := s.sent[seq]
	delete(s.sent, seq)
	return tg, ok
}

func (s *Stream) publish(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	return s.js.PublishMsg(rctx, m)
}

// redriveHeader is the header a redriven message carries (see Publish).
func (s *Stream) redriveHeader(h nats.Header, env envelope.Envelope, it backend.MoveItem, mk backend.Markers, msgID string) nats.Header {
	out := nats.Header{}
	for k, vs := range h {
		if staleHeader(k) || k == HeaderMsgID || k == SourceIDHeader {
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	n := s.dec.names
	if !hasAny(out, n[envelope.FieldEventID]) {
		out.Set(n[envelope.FieldEventID][0], env.EventID)
	}
	rcName := n[envelope.FieldRedriveCount][0]
	for _, name := range n[envelope.FieldRedriveCount] {
		if _, ok := out[name]; ok {
			rcName = name
			break
		}
	}
	out.Set(rcName, strconv.Itoa(env.RedriveCount+1))
	out.Set(backend.MarkerRunID, mk.RunID)
	out.Set(backend.MarkerSeq, strconv.FormatInt(it.Seq, 10))
	out.Set(backend.MarkerRedrivenFrom, it.ID)
	out.Set(HeaderMsgID, msgID)
	return out
}

func hasAny(h nats.Header, names []string) bool {
	for _, n := range names {
		if _, ok := h[n]; ok {
			return true
		}
	}
	return false
}

// removeWorkers is how many deletes are in flight at once.
const removeWorkers = 8

// Remove deletes each item's copy by sequence (advisory shape: the
// message the advisory is about from its stream, then the advisory), once
// it knows the entry there is the planned one: this process published it,
// or it reads it and its fingerprint is the planned one. A DLQ stream
// deleted and made again numbers its entries from 1 again, and the entry
// now at a planned sequence is another dead letter, which stays. A
// sequence the stream no longer holds ("no message found", 10057: an
// earlier run or a resume removed it), or that holds another entry, gets
// ErrNotFound.
func (s *Stream) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	st, err := s.handle(ctx)
	if err != nil {
		if errors.Is(err, backend.ErrNotFound) {
			results := make([]backend.MoveResult, len(items))
			for i := range results {
				results[i].Err = err
			}
			return results, nil
		}
		return nil, err
	}
	results := make([]backend.MoveResult, len(items))
	hard := make([]error, len(items))
	inParallel(len(items), removeWorkers, func(i int) {
		seq, ok := parseID(items[i].ID)
		if !ok {
			results[i].Err = fmt.Errorf("%q is no stream sequence: %w", items[i].ID, backend.ErrNotFound)
			return
		}
		if results[i].Err, hard[i] = s.removable(ctx, items[i], seq); results[i].Err != nil || hard[i] != nil {
			return
		}
		rctx, cancel := s.reqCtx(ctx)
		err := st.DeleteMsg(rctx, seq)
		cancel()
		switch {
		case err == nil:
			results[i].Removed = true
		case isNoMessage(err):
			results[i].Err = fmt.Errorf("message %d: %w in %s", seq, backend.ErrNotFound, s)
		case errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful):
			results[i].Err = s.wrap(fmt.Sprintf("delete message %d", seq), err)
		default:
			hard[i] = s.wrap(fmt.Sprintf("delete message %d", seq), err)
		}
	})
	if err := errors.Join(hard...); err != nil {
		return nil, err
	}
	return results, nil
}

// removable checks that the entry at seq is the planned it before Remove
// deletes it, and in advisory shape deletes the original first: a crash
// between the two leaves the advisory, whose removal a resume finishes.
// The first error is the item's own (ErrNotFound when the planned entry is
// gone), the second a failure to reach the server.
func (s *Stream) removable(ctx context.Context, it backend.MoveItem, seq uint64) (itemErr, err error) {
	tg, sent := s.takeSent(seq)
	if sent && !s.src.advisories {
		return nil, nil
	}
	if !sent {
		m, err := s.get(ctx, seq)
		if errors.Is(err, backend.ErrNotFound) {
			return err, nil
		}
		if err != nil {
			return nil, err
		}
		if !s.src.advisories {
			if e := s.dec.decode(m, true); !strings.EqualFold(e.Fingerprint, it.Fingerprint) {
				return s.notPlanned(seq, it, e.Fingerprint), nil
			}
			return nil, nil
		}
		e, t, ok, err := s.decodeAdvisory(ctx, m, true)
		switch {
		case err != nil:
			return nil, err
		case !ok || (t.why != "" && !t.gone):
			return s.notPlanned(seq, it, "(no dead-letter advisory)"), nil
		case t.gone:
			// Its message is gone: a crash between the two deletes
			// left the advisory, or the message left its stream.
			s.setMovedBy(t.key(), it.ID)
			return nil, nil
		case !strings.EqualFold(e.Fingerprint, it.Fingerprint):
			return s.notPlanned(seq, it, e.Fingerprint), nil
		}
		tg = t
	}
	return nil, s.removeOriginal(ctx, it, tg)
}

// notPlanned: the entry at seq is not the planned one (its stream was
// deleted and made again, with the planned entry): it stays.
func (s *Stream) notPlanned(seq uint64, it backend.MoveItem, now string) error {
	return fmt.Errorf("message %d: the planned entry is gone, and the one there now is another (fingerprint %s, planned %s; the stream was made again): it stays: %w in %s", seq, now, it.Fingerprint, backend.ErrNotFound, s)
}

// removeOriginal deletes the message an advisory entry resolved to from its
// stream, so that it can never be redriven twice. A message or stream that
// is gone already is no error.
func (s *Stream) removeOriginal(ctx context.Context, it backend.MoveItem, tg target) error {
	a := tg.a
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	st, err := s.js.Stream(rctx, a.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return s.wrap("look up the stream "+a.Stream, err)
	}
	if !st.CachedInfo().Created.Equal(tg.created) {
		return nil // made again since: the message is gone with it
	}
	if err := st.DeleteMsg(rctx, a.StreamSeq); err != nil && !isNoMessage(err) {
		return s.wrap(fmt.Sprintf("delete message %d of %s", a.StreamSeq, a.Stream), err)
	}
	s.setMovedBy(tg.key(), it.ID)
	return nil
}

// isNoMessage: the server answered a delete with "no message found"
// (10057), or a get with "message not found" (10037).
func isNoMessage(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == 10057 || apiErr.ErrorCode == jetstream.JSErrCodeMessageNotFound) {
		return true
	}
	// DeleteMsg flattens the server's error into text.
	return strings.Contains(err.Error(), "err_code=10057")
}
