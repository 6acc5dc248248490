package redrive

import (
	"context"
	"errors"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// resolveChunks archives each entry's full envelope in the journal, synced,
// and only then removes it from the DLQ.
func (e *Engine) resolveChunks(ctx context.Context, st *State, seqs []int64) error {
	const chunk = 100
	var todo []Entry
	for _, s := range seqs {
		if !st.done(s) {
			todo = append(todo, st.entry(s))
		}
	}
	done := 0
	for _, b := range st.Batches {
		done += b.Size
	}
	for i := 0; i < len(todo); i += chunk {
		part := todo[i:min(i+chunk, len(todo))]
		var recs []Record
		var remove []Entry
		for _, en := range part {
			env, err := e.Source.Get(ctx, en.ID)
			switch {
			case errors.Is(err, backend.ErrNotFound):
				if st.Step(en.Seq) == RecArchive {
					recs = append(recs, e.entryRec(RecRemoved, st, en, ""))
				} else {
					recs = append(recs, e.entryRec(RecGone, st, en, "no longer in the DLQ"))
				}
				continue
			case err != nil:
				return err
			}
			if env.Fingerprint != en.Fingerprint {
				recs = append(recs, e.entryRec(RecSkipped, st, en, backend.ErrChanged.Error()))
				continue
			}
			r := e.entryRec(RecArchive, st, en, st.Plan.Reason)
			r.Envelope = archived(env)
			recs = append(recs, r)
			remove = append(remove, en)
		}
		if err := e.commit(st, RecArchive, recs...); err != nil {
			return err
		}
		if len(remove) > 0 {
			if err := e.removeChunk(ctx, st, remove); err != nil {
				return err
			}
		}
		if e.Observer != nil {
			e.Observer.Progress(done+i+len(part), st.Plan.Entries.Len())
		}
		if ctx.Err() != nil {
			return stopped(ctx, ctx.Err())
		}
	}
	return nil
}

func archived(env envelope.Envelope) *envelope.Envelope {
	env.Fingerprint = env.CarriedFingerprint()
	return &env
}
