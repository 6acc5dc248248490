package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// settleOpen decides, for the entries of a batch that a crash (or a
// journal that cannot be believed) left between steps, what is left to do:
// publish, only remove, or nothing. The journal's word is checked against
// the backend wherever it can be: an atomic mover's entry still in the DLQ
// was not moved, whatever the journal says; and an entry that left the DLQ
// is counted as moved only when the destination does not deny it.
func (e *Engine) settleOpen(ctx context.Context, st *State, seqs []int64, since time.Time) (publish, remove []int64, err error) {
	checker, _ := e.Mover.(backend.PublishedChecker)
	var recs []Record
	// ask lists the entries to look up on the destination, and what each
	// answer means.
	type pending struct {
		en     Entry
		inDLQ  bool
		wasPub bool
	}
	var ask []pending
	for _, s := range seqs {
		step := st.Step(s)
		switch step {
		case RecRemoved, RecGone, RecSkipped:
			continue
		case RecPublished, RecIntent, RecAmbiguous:
		default:
			publish = append(publish, s)
			continue
		}
		en := st.entry(s)
		wasPub := step == RecPublished
		if e.Mover.Atomic() {
			// The move was one atomic step: if the entry is still in the
			// DLQ it did not happen, if it is gone it did (unless the
			// destination says it never arrived).
			_, gerr := e.Source.Get(ctx, en.ID)
			switch {
			case errors.Is(gerr, backend.ErrNotFound):
				if checker == nil {
					recs = append(recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume: the atomic move had completed"))
				} else {
					ask = append(ask, pending{en: en, wasPub: wasPub})
				}
			case gerr != nil:
				return nil, nil, gerr
			default:
				if wasPub {
					recs = append(recs, e.entryRec(RecIntent, st, en, "the journal says published, but the entry is still in the DLQ: an atomic move cannot have happened; moving it now"))
				}
				publish = append(publish, en.Seq)
			}
			continue
		}
		if checker != nil {
			ask = append(ask, pending{en: en, inDLQ: true, wasPub: wasPub})
			continue
		}
		if wasPub {
			remove = append(remove, en.Seq)
			continue
		}
		// Outcome unknown: send again with the same identity, so the
		// broker's deduplication can drop it and the consumer absorb it.
		recs = append(recs, e.entryRec(RecAmbiguous, st, en, "outcome of the earlier send unknown; resent with the same event ID and sequence"))
		publish = append(publish, en.Seq)
	}
	if len(ask) > 0 {
		queries := make([]backend.PublishedQuery, len(ask))
		for i, a := range ask {
			queries[i] = backend.PublishedQuery{Item: e.item(a.en), DestID: st.DestID(a.en.Seq), Since: since}
		}
		found, cerr := checker.CheckPublished(ctx, queries, e.markers(st))
		if cerr != nil {
			return nil, nil, fmt.Errorf("look up the destination: %w", cerr)
		}
		if len(found) != len(queries) {
			return nil, nil, fmt.Errorf("look up the destination: %d answers for %d entries", len(found), len(queries))
		}
		for i, a := range ask {
			en := a.en
			switch {
			case !a.inDLQ && found[i] == backend.PresenceAbsent:
				recs = append(recs, e.entryRec(RecGone, st, en, "left the DLQ, but the destination holds no copy from this run: removed by someone else (e.g. XTRIM), not moved"))
			case !a.inDLQ && found[i] == backend.PresenceFound:
				recs = append(recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume, and found on the destination: the atomic move had completed"))
			case !a.inDLQ:
				recs = append(recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume: the atomic move had completed (the destination cannot confirm it)"))
			case found[i] == backend.PresenceFound:
				if !a.wasPub {
					r := e.entryRec(RecPublished, st, en, "found on the destination with this run's markers")
					recs = append(recs, r)
				}
				remove = append(remove, en.Seq)
			case found[i] == backend.PresenceAbsent:
				// Not believed: the journal's word alone never removes an
				// entry from the DLQ. Sent again with the same identity, in
				// case a consumer deleted what it took.
				recs = append(recs, e.entryRec(RecAmbiguous, st, en, "not found on the destination with this run's markers; sent again with the same event ID and sequence"))
				publish = append(publish, en.Seq)
			case a.wasPub:
				remove = append(remove, en.Seq)
			default:
				recs = append(recs, e.entryRec(RecAmbiguous, st, en, "outcome of the earlier send unknown; resent with the same event ID and sequence"))
				publish = append(publish, en.Seq)
			}
		}
	}
	if err := e.commit(st, "", recs...); err != nil {
		return nil, nil, err
	}
	return publish, remove, nil
}
