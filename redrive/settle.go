package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// settlement is what settleOpen decides for a batch's open entries: the
// records to journal, the entries to publish and those only to remove,
// and the entries to look up on the destination before deciding.
type settlement struct {
	recs            []Record
	publish, remove []int64
	ask             []openEntry
}

// openEntry is an entry to look up on the destination, and what each
// answer means: whether it is still in the DLQ, and whether the journal
// says it was published.
type openEntry struct {
	en     Entry
	inDLQ  bool
	wasPub bool
}

// settleOpen decides, for the entries of a batch that a crash (or a
// journal that cannot be believed) left between steps, what is left to do:
// publish, only remove, or nothing. The journal's word is checked against
// the backend wherever it can be: an atomic mover's entry still in the DLQ
// was not moved, whatever the journal says; and an entry that left the DLQ
// is counted as moved only when the destination does not deny it.
func (e *Engine) settleOpen(ctx context.Context, st *State, seqs []int64, since time.Time) (publish, remove []int64, err error) {
	checker, _ := e.Mover.(backend.PublishedChecker)
	var s settlement
	for _, seq := range seqs {
		switch step := st.Step(seq); step {
		case RecRemoved, RecGone, RecSkipped:
		case RecPublished, RecIntent, RecAmbiguous:
			if err := e.settleStep(ctx, st, seq, step, checker != nil, &s); err != nil {
				return nil, nil, err
			}
		default:
			s.publish = append(s.publish, seq)
		}
	}
	if len(s.ask) > 0 {
		if err := e.settleAsked(ctx, st, checker, since, &s); err != nil {
			return nil, nil, err
		}
	}
	if err := e.commit(st, "", s.recs...); err != nil {
		return nil, nil, err
	}
	return s.publish, s.remove, nil
}

// settleStep settles one entry whose last journaled step is step
// (published, intent or ambiguous) by what the DLQ says, or, when the
// mover can look up the destination (canAsk), leaves it to settleAsked.
func (e *Engine) settleStep(ctx context.Context, st *State, seq int64, step string, canAsk bool, s *settlement) error {
	en := st.entry(seq)
	wasPub := step == RecPublished
	if e.Mover.Atomic() {
		// The move was one atomic step: if the entry is still in the
		// DLQ it did not happen, if it is gone it did (unless the
		// destination says it never arrived).
		_, gerr := e.Source.Get(ctx, en.ID)
		switch {
		case errors.Is(gerr, backend.ErrNotFound):
			if !canAsk {
				s.recs = append(s.recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume: the atomic move had completed"))
			} else {
				s.ask = append(s.ask, openEntry{en: en, wasPub: wasPub})
			}
		case gerr != nil:
			return gerr
		default:
			if wasPub {
				s.recs = append(s.recs, e.entryRec(RecIntent, st, en, "the journal says published, but the entry is still in the DLQ: an atomic move cannot have happened; moving it now"))
			}
			s.publish = append(s.publish, en.Seq)
		}
		return nil
	}
	if canAsk {
		s.ask = append(s.ask, openEntry{en: en, inDLQ: true, wasPub: wasPub})
		return nil
	}
	if wasPub {
		s.remove = append(s.remove, en.Seq)
		return nil
	}
	// Outcome unknown: send again with the same identity, so the
	// broker's deduplication can drop it and the consumer absorb it.
	s.recs = append(s.recs, e.entryRec(RecAmbiguous, st, en, "outcome of the earlier send unknown; resent with the same event ID and sequence"))
	s.publish = append(s.publish, en.Seq)
	return nil
}

// settleAsked looks up s.ask on the destination, by this run's markers
// since the batch started, and settles each by the answer.
func (e *Engine) settleAsked(ctx context.Context, st *State, checker backend.PublishedChecker, since time.Time, s *settlement) error {
	queries := make([]backend.PublishedQuery, len(s.ask))
	for i, a := range s.ask {
		queries[i] = backend.PublishedQuery{Item: e.item(a.en), DestID: st.DestID(a.en.Seq), Since: since}
	}
	found, cerr := checker.CheckPublished(ctx, queries, e.markers(st))
	if cerr != nil {
		return fmt.Errorf("look up the destination: %w", cerr)
	}
	if len(found) != len(queries) {
		return fmt.Errorf("look up the destination: %d answers for %d entries", len(found), len(queries))
	}
	for i, a := range s.ask {
		en := a.en
		switch {
		case !a.inDLQ && found[i] == backend.PresenceAbsent:
			s.recs = append(s.recs, e.entryRec(RecGone, st, en, "left the DLQ, but the destination holds no copy from this run: removed by someone else (e.g. XTRIM), not moved"))
		case !a.inDLQ && found[i] == backend.PresenceFound:
			s.recs = append(s.recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume, and found on the destination: the atomic move had completed"))
		case !a.inDLQ:
			s.recs = append(s.recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume: the atomic move had completed (the destination cannot confirm it)"))
		case found[i] == backend.PresenceFound:
			if !a.wasPub {
				r := e.entryRec(RecPublished, st, en, "found on the destination with this run's markers")
				s.recs = append(s.recs, r)
			}
			s.remove = append(s.remove, en.Seq)
		case found[i] == backend.PresenceAbsent:
			// Not believed: the journal's word alone never removes an
			// entry from the DLQ. Sent again with the same identity, in
			// case a consumer deleted what it took.
			s.recs = append(s.recs, e.entryRec(RecAmbiguous, st, en, "not found on the destination with this run's markers; sent again with the same event ID and sequence"))
			s.publish = append(s.publish, en.Seq)
		case a.wasPub:
			s.remove = append(s.remove, en.Seq)
		default:
			s.recs = append(s.recs, e.entryRec(RecAmbiguous, st, en, "outcome of the earlier send unknown; resent with the same event ID and sequence"))
			s.publish = append(s.publish, en.Seq)
		}
	}
	return nil
}
