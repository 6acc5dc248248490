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

// RedriveMsgID is the Nats-Msg-Id of the redrive of the copy at DLQ
// sequence seq. It depends on the copy alone (DLQ stream, sequence, event
// ID and fingerprint), never on the run: a resend of the same move, by a
// resume or by a new plan after a crash, carries the same ID, and the
// destination stream drops it inside its duplicate window. It never
// collides with the original publish, whose ID the producer chose, and a
// copy dead-lettered again later has a new sequence, so its own redrive is
// never taken for a duplicate of the first.
func RedriveMsgID(dlqStream string, seq uint64, eventID, fingerprint string) string {
	h := sha256.Sum256([]byte(eventID + "\x00" + strings.ToLower(fingerprint)))
	return "dlqctl-redrive:" + dlqStream + ":" + strconv.FormatUint(seq, 10) + ":" + hex.EncodeToString(h[:8])
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
// and RedriveMsgID as Nats-Msg-Id. An ack that says duplicate is a resend
// the stream dropped: the move had happened, and DestID names the stored
// message.
//
// Per item, nothing is sent and Err is set when the copy is gone
// (ErrNotFound), its fingerprint is not the planned one (ErrChanged), it
// has no destination, or an earlier item for the same destination failed
// (so that a later entry never overtakes it). A lost connection returns an
// error: the outcome of the item in flight is then unknown.
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
		msg, env := msgs[i], envelope.Envelope{}
		if s.src.advisories {
			e, orig, ok, err := s.decodeAdvisory(ctx, msgs[i], true)
			switch {
			case err != nil:
				return nil, err
			case !ok:
				results[i].Err = fmt.Errorf("message %s is no dead-letter advisory: %w", it.ID, backend.ErrNotFound)
				continue
			case e.Malformed != "":
				results[i].Err = fmt.Errorf("move %s: %s", it.ID, e.Malformed)
				continue
			}
			msg, env = orig, e
		} else {
			env = s.dec.decode(msg, true)
		}
		if !strings.EqualFold(env.Fingerprint, it.Fingerprint) {
			results[i].Err = fmt.Errorf("message %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, env.Fingerprint)
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
		out := &nats.Msg{Subject: it.Dest, Data: msg.Data, Header: s.redriveHeader(msg.Header, env, it, mk)}
		ack, err := s.publish(ctx, out)
		if err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
				// The server answered, or no stream listens on the
				// subject: nothing was stored.
				results[i].Err = fmt.Errorf("move %s to %s: %v", it.ID, it.Dest, backend.Scrub(err, s.src.secrets()...))
				failed[it.Dest] = true
				continue
			}
			return nil, s.wrap(fmt.Sprintf("publish message %s to %s", it.ID, it.Dest), err)
		}
		results[i].DestID = ack.Stream + ":" + strconv.FormatUint(ack.Sequence, 10)
	}
	return results, nil
}

func (s *Stream) publish(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	return s.js.PublishMsg(rctx, m)
}

// redriveHeader is the header a redriven message carries (see Publish).
func (s *Stream) redriveHeader(h nats.Header, env envelope.Envelope, it backend.MoveItem, mk backend.Markers) nats.Header {
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
	seq, _ := parseID(it.ID)
	out.Set(HeaderMsgID, RedriveMsgID(s.src.stream, seq, env.EventID, env.Fingerprint))
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

// Remove deletes each item's copy by sequence. A sequence the stream no
// longer holds ("no message found", 10057: an earlier run or a resume
// removed it) gets ErrNotFound.
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
		if s.src.advisories {
			// The original first: a crash between the two leaves the
			// advisory, whose removal a resume finishes.
			if err := s.removeOriginal(ctx, seq); err != nil {
				hard[i] = err
				return
			}
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

// removeOriginal deletes the message the advisory at seq is about from its
// stream, so that it can never be redriven twice. An advisory, message or
// stream that is gone already is no error.
func (s *Stream) removeOriginal(ctx context.Context, seq uint64) error {
	m, err := s.get(ctx, seq)
	if errors.Is(err, backend.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	a, err := parseAdvisory(m.Data)
	if err != nil {
		return nil // nothing to resolve it to: only the advisory goes
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	st, err := s.js.Stream(rctx, a.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return s.wrap("look up the stream "+a.Stream, err)
	}
	if err := st.DeleteMsg(rctx, a.StreamSeq); err != nil && !isNoMessage(err) {
		return s.wrap(fmt.Sprintf("delete message %d of %s", a.StreamSeq, a.Stream), err)
	}
	return nil
}
