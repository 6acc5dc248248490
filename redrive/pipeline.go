package redrive

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqctl/dlqctl/backend"
)

// The publish pipeline. A chunk's move is one round trip, and its journal
// steps are one write and one sync each side of it; done one after the
// other, the round trip waited on the disk and the disk on the round trip.
// For an atomic mover (Redis, dir, Kafka: published and removed in one
// step) the pipeline keeps both busy without giving up the write-ahead
// rule:
//
//   - chunk k+1's intents are written and synced while chunk k's publish is
//     in flight, and chunk k+1 is sent only after that sync returned and
//     chunk k's publish came back;
//   - nothing waits on chunk k's results, so they are journaled in the same
//     write as chunk k+2's intents, while chunk k+1 is in flight: one sync
//     per chunk;
//   - should an entry still have to be removed, its published record is
//     synced before its removal is sent, and the removal is sent before the
//     next chunk's publish.
//
// A mover that is not atomic (Pulsar, SQS, a Redis Cluster) removes every
// entry in a second round trip after its published record: its chunks are
// not overlapped, and each goes intents, publish, published, remove,
// removed, as before the pipeline, and so does each of its crash points.
//
// There is one mover call at a time, on one goroutine at a time, in plan
// order, so entries that share a key reach the destination in their order
// exactly as without the pipeline. Ctrl-C (or the time limit) stops the
// preparing of chunks; every chunk whose intents were synced is still sent
// and journaled, so an interrupted journal holds no intent without its
// outcome. A crash leaves at most two chunks between steps (one in flight,
// one whose intents are synced), which resume settles as it settles one.

// flight is one publish running on its own goroutine while the engine
// journals.
type flight struct {
	part    []Entry
	items   []backend.MoveItem
	done    chan struct{}
	results []backend.MoveResult
	err     error
}

// launch sends part's publish. It runs to its end even after Ctrl-C, within
// MoveTimeout, like every move in flight.
func (e *Engine) launch(ctx context.Context, st *State, part []Entry) *flight {
	items := make([]backend.MoveItem, len(part))
	for i, en := range part {
		items[i] = e.item(en)
	}
	f := &flight{part: part, items: items, done: make(chan struct{})}
	m := e.markers(st)
	mctx, cancel := e.moveCtx(ctx)
	go func() {
		defer close(f.done)
		defer cancel()
		f.results, f.err = e.Mover.Publish(mctx, items, m)
	}()
	return f
}

// wait is the flight's outcome, checked to hold one result per entry.
func (f *flight) wait() ([]backend.MoveResult, error) {
	<-f.done
	if f.err != nil {
		return nil, fmt.Errorf("publish: %w", f.err)
	}
	if err := oneEach("publish", f.results, f.items); err != nil {
		return nil, err
	}
	return f.results, nil
}

// publishChunks publishes the entries seqs chunk by chunk through the
// pipeline; done is how many entries earlier batches held, for progress.
// A chunk's entries are made from the compact plan only when it is
// prepared, so a batch of a million costs a chunk's worth of them.
func (e *Engine) publishChunks(ctx context.Context, st *State, seqs []int64, done int) error {
	p := &publishing{e: e, st: st, seqs: seqs, chunk: e.chunkSize(), done: done}
	// A mover that is not atomic removes each entry in a second round trip
	// after its published record is synced: its chunks go one after the
	// other, each step journaled before the next, as they always have.
	ahead := e.Mover.Atomic()
	// Never leave with a publish running: not on an error, not when a
	// crash hook (tests) unwinds the stack. The backend then sees no
	// mover call after this one returns.
	defer p.drain()
	for {
		if p.fl != nil && !ahead {
			if err := p.land(ctx, false); err != nil {
				return err
			}
		}
		part, err := p.prepare(ctx)
		if err != nil {
			return err
		}
		// One write (with an atomic mover, while the chunk in flight is on
		// its round trip).
		if err := e.commitGroup(st, &p.writeBuf, p.carry, part); err != nil {
			return err
		}
		p.carry = nil
		if p.fl != nil {
			// With no chunk to send next, the last results of an atomic
			// mover are held for the batch's end write (hold): nothing
			// is sent before it. Stopped early, they are written now.
			if err := p.land(ctx, len(part) > 0 || p.stop == nil); err != nil {
				return err
			}
		}
		if len(part) == 0 {
			return p.end()
		}
		if err := e.flush(); err != nil {
			return err
		}
		p.fl = e.launch(ctx, st, part)
	}
}

// publishing is one batch's pass through the pipeline: the chunk in
// flight and what the next journal write carries.
type publishing struct {
	e     *Engine
	st    *State
	seqs  []int64
	chunk int
	done  int // entries earlier batches held, for progress

	fl    *flight  // the chunk in flight
	carry []Record // results of the chunk before it, not journaled yet
	stop  error    // why no more chunks are prepared
	next  int      // the first entry of the next chunk
	sent  int      // entries whose publish came back
	// The step records of a chunk's results, and of each write: kept
	// from chunk to chunk (up to three records an entry a write), since
	// nothing holds on to them once they are journaled.
	resultBuf, writeBuf []Record
}

// drain waits for the publish in flight, if any.
func (p *publishing) drain() {
	if p.fl != nil {
		<-p.fl.done
	}
}

// prepare makes the next chunk to send: its entries, checked by the
// guard, after the rate limiter let them go. A chunk whose every
// destination is refused sends nothing: the next one is prepared in its
// place. No chunk (and p.stop set) when Ctrl-C or the time limit came;
// no chunk when seqs are all sent.
func (p *publishing) prepare(ctx context.Context) ([]Entry, error) {
	var part []Entry
	for len(part) == 0 && p.next < len(p.seqs) && p.stop == nil {
		n := min(p.chunk, len(p.seqs)-p.next)
		switch {
		case ctx.Err() != nil:
			p.stop = stopped(ctx, ctx.Err())
		case p.e.Limiter != nil:
			if err := p.e.Limiter.WaitN(ctx, n); err != nil {
				p.stop = stopped(ctx, err)
			}
		}
		if p.stop == nil {
			var refused []Record
			var err error
			part, refused, err = p.e.guardChunk(ctx, p.st, p.st.entriesOf(p.seqs[p.next:p.next+n]))
			if err != nil {
				return nil, err
			}
			p.next += n
			p.carry = append(p.carry, refused...)
		}
	}
	return part, nil
}

// land takes the flight's results: journaled at once, or carried into
// the next write when nothing waits on them.
func (p *publishing) land(ctx context.Context, canCarry bool) error {
	e, st := p.e, p.st
	results, err := p.fl.wait()
	flown := p.fl.part
	p.fl = nil
	if err != nil {
		return err
	}
	recs, remove := e.publishedRecs(p.resultBuf[:0], st, flown, results)
	if err := e.confirmGone(ctx, st, recs); err != nil {
		return err
	}
	p.resultBuf = recs
	p.sent += len(flown)
	if canCarry && len(remove) == 0 {
		p.carry = recs
	} else {
		// A removal waits for its published record.
		if err := e.commit(st, RecPublished, recs...); err != nil {
			return err
		}
		if len(remove) > 0 {
			if err := e.removeChunk(ctx, st, remove); err != nil {
				return err
			}
		}
	}
	if e.Observer != nil {
		e.Observer.Progress(p.done+p.sent, st.Plan.Entries.Len())
	}
	return nil
}

// end is the pipeline's last step, with no chunk left to send: the results
// still carried are held for the batch's end write, or, stopped early,
// written now.
func (p *publishing) end() error {
	if len(p.carry) > 0 {
		if p.stop != nil {
			return errors.Join(p.stop, p.e.commit(p.st, RecPublished, p.carry...))
		}
		p.e.hold(p.st, p.carry...)
	}
	return p.stop
}

// commitGroup journals, in one write and one sync, the results carried
// from an earlier chunk and the intents of part, the chunk about to be
// sent; buf is where the write's records are put together. The crash hook
// (tests) hears each kind of step the write held: a crash "after the
// published step" then also finds the next intents synced, as a real crash
// there would.
func (e *Engine) commitGroup(st *State, buf *[]Record, results []Record, part []Entry) error {
	recs := append((*buf)[:0], results...)
	for _, en := range part {
		// An entry resumed as ambiguous, or whose intent a crash left,
		// has its intent journaled already.
		if s := st.Step(en.Seq); s != RecAmbiguous && s != RecIntent {
			recs = append(recs, e.entryRec(RecIntent, st, en, ""))
		}
	}
	*buf = recs
	if err := e.commit(st, "", recs...); err != nil {
		return err
	}
	if len(results) > 0 {
		e.crash(RecPublished)
	}
	if len(part) > 0 {
		e.crash(RecIntent)
	}
	return nil
}

// publishedRecs appends to recs the step records of a chunk's publish
// results, and returns them with the entries that still have to be
// removed from the DLQ.
func (e *Engine) publishedRecs(recs []Record, st *State, part []Entry, results []backend.MoveResult) ([]Record, []Entry) {
	var remove []Entry
	for i, res := range results {
		en := part[i]
		switch {
		case errors.Is(res.Err, backend.ErrSameMessage):
			// Its message is where another entry put it, and the backend
			// removed this one: done, with nothing published.
			recs = append(recs, e.entryRec(RecRemoved, st, en, res.Err.Error()))
		case errors.Is(res.Err, backend.ErrNotFound):
			// The backend's word says who took it, where it knows.
			recs = append(recs, e.entryRec(RecGone, st, en, "no longer in the DLQ: nothing published ("+res.Err.Error()+")"))
		case errors.Is(res.Err, backend.ErrChanged):
			recs = append(recs, e.entryRec(RecSkipped, st, en, res.Err.Error()))
		case res.Err != nil:
			recs = append(recs, e.entryRec(RecFailed, st, en, res.Err.Error()))
		default:
			r := e.entryRec(RecPublished, st, en, "")
			r.DestID = res.DestID
			recs = append(recs, r)
			if res.Removed {
				recs = append(recs, e.entryRec(RecRemoved, st, en, ""))
			} else {
				remove = append(remove, en)
			}
		}
	}
	return recs, remove
}

// guardChunk checks each entry's destination again before it is sent: the
// plan was approved, but what the backend counts as its own bookkeeping
// can have changed since (a state topic recorded by another run). An entry
// whose destination is refused is a failure of its own, named with the
// reason, and the rest of the chunk goes on. An error means the guard
// could not tell: nothing of the chunk is sent.
func (e *Engine) guardChunk(ctx context.Context, st *State, part []Entry) ([]Entry, []Record, error) {
	if e.guards == nil {
		e.guards = backend.NewGuards(e.Source)
	}
	var refused []Record
	kept := part[:0]
	for _, en := range part {
		if en.Dest != "" {
			if err := e.guards.Check(ctx, en.Dest); err != nil {
				if !errors.Is(err, backend.ErrRefusedDestination) {
					return nil, nil, err
				}
				refused = append(refused, e.entryRec(RecFailed, st, en, err.Error()))
				continue
			}
		}
		kept = append(kept, en)
	}
	return kept, refused, nil
}

// confirmGone looks up on the destination, by this run's markers, every
// entry of recs that a publish found gone from the DLQ. A crash can take
// the journal's last write with it (a write cut at its boundary): the
// entries whose moves it recorded then have no outcome in the journal, and
// a resume that sends them again finds them gone. Moved by this run is what
// the destination says, and such an entry is counted moved, not gone.
func (e *Engine) confirmGone(ctx context.Context, st *State, recs []Record) error {
	checker, ok := e.Mover.(backend.PublishedChecker)
	if !ok {
		return nil
	}
	var at []int
	var queries []backend.PublishedQuery
	for i, r := range recs {
		if r.Type != RecGone {
			continue
		}
		at = append(at, i)
		queries = append(queries, backend.PublishedQuery{Item: e.item(st.entry(r.Seq)), DestID: st.DestID(r.Seq), Since: st.Start.At})
	}
	if len(queries) == 0 {
		return nil
	}
	mctx, cancel := e.moveCtx(ctx)
	found, err := checker.CheckPublished(mctx, queries, e.markers(st))
	cancel()
	if err != nil {
		return fmt.Errorf("look up the destination: %w", err)
	}
	if len(found) != len(queries) {
		return fmt.Errorf("look up the destination: %d answers for %d entries", len(found), len(queries))
	}
	for k, i := range at {
		if found[k] == backend.PresenceFound {
			recs[i] = e.entryRec(RecRemoved, st, st.entry(recs[i].Seq), "no longer in the DLQ, and found on the destination with this run's markers: moved by this run before a crash that the journal lost")
		}
	}
	return nil
}
