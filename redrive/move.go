package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// moveCtx lets a chunk in flight finish after Ctrl-C, within MoveTimeout.
func (e *Engine) moveCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := e.MoveTimeout
	if d == 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

func (e *Engine) item(en Entry) backend.MoveItem {
	return backend.MoveItem{Seq: en.Seq, ID: en.ID, EventID: en.EventID, Fingerprint: en.Fingerprint, Dest: en.Dest}
}

// entryRec is an entry's step record: the entry by its plan sequence
// number, and only what is new (the note; the caller adds a destination ID).
func (e *Engine) entryRec(typ string, st *State, en Entry, note string) Record {
	return Record{Type: typ, Seq: en.Seq, Note: note}
}

// oneEach checks that a backend answered one result per item: anything
// else leaves every item's outcome unknown, as a failed call does.
func oneEach(what string, results []backend.MoveResult, items []backend.MoveItem) error {
	if len(results) != len(items) {
		return fmt.Errorf("%s: the backend returned %d results for %d entries; the outcome of each is unknown", what, len(results), len(items))
	}
	return nil
}

func (e *Engine) moveChunks(ctx context.Context, st *State, seqs []int64, since time.Time) error {
	publish, remove, err := e.settleOpen(ctx, st, seqs, since)
	if err != nil {
		return err
	}
	if len(remove) > 0 {
		if err := e.removeChunk(ctx, st, st.entriesOf(remove)); err != nil {
			return err
		}
	}
	// A resumed batch's entries that a stopped run already moved count as
	// done: the bar goes on from the total moved.
	done := len(seqs) - len(publish)
	for _, b := range st.Batches {
		done += b.Size
	}
	// The chunks go through a pipeline (pipeline.go): the next chunk's
	// intents are synced while the current chunk's round trip is in flight.
	return e.publishChunks(ctx, st, publish, done)
}

func (e *Engine) removeChunk(ctx context.Context, st *State, part []Entry) error {
	if err := e.flush(); err != nil {
		return err
	}
	items := make([]backend.MoveItem, 0, len(part))
	for _, en := range part {
		items = append(items, e.item(en))
	}
	mctx, cancel := e.moveCtx(ctx)
	results, err := e.Mover.Remove(mctx, items)
	cancel()
	if err != nil {
		return fmt.Errorf("remove from the DLQ: %w", err)
	}
	if err := oneEach("remove from the DLQ", results, items); err != nil {
		return err
	}
	var recs []Record
	for i, res := range results {
		en := part[i]
		switch {
		case errors.Is(res.Err, backend.ErrNotFound):
			recs = append(recs, e.entryRec(RecRemoved, st, en, "already gone from the DLQ"))
		case res.Err != nil:
			recs = append(recs, e.entryRec(RecFailed, st, en, "remove: "+res.Err.Error()))
		default:
			recs = append(recs, e.entryRec(RecRemoved, st, en, ""))
		}
	}
	return e.commit(st, RecRemoved, recs...)
}
