package redrive

// State is where a run stands, rebuilt from its journal. Apply starts from
// an empty State; status and resume replay the journal into one.
type State struct {
	RunID    string
	Plan     *Plan
	Start    Record
	Batches  []BatchReport
	Status   string
	HaltedBy string
	LastNote string

	step   map[int64]string
	destID map[int64]string
	// open is the batch that started and did not end.
	open *Record
}

func newState(runID string, p *Plan) *State {
	return &State{RunID: runID, Plan: p, step: map[int64]string{}, destID: map[int64]string{}}
}

// Replay rebuilds the state from a journal's records.
func Replay(recs []Record) *State {
	st := newState(recs[0].RunID, recs[0].Plan)
	st.Start = recs[0]
	for i := range recs {
		r := recs[i]
		switch r.Type {
		case RecIntent, RecAmbiguous, RecPublished, RecRemoved, RecGone, RecSkipped, RecFailed, RecArchive:
			st.note(r)
		case RecBatchStart:
			st.open = &recs[i]
		case RecBatchEnd:
			st.open = nil
			if r.Batch != nil {
				st.Batches = append(st.Batches, *r.Batch)
			}
		case RecRunEnd:
			st.Status, st.HaltedBy, st.LastNote = r.Status, r.HaltedBy, r.Note
		case RecResume:
			st.Status, st.HaltedBy = "", ""
		}
	}
	return st
}

func (st *State) note(r Record) {
	switch r.Type {
	case RecFailed:
		// A failed item is still in the DLQ; a resume tries it again.
		delete(st.step, r.Seq)
		st.step[r.Seq] = RecFailed
	case RecArchive:
		if st.step[r.Seq] == RecIntent {
			st.step[r.Seq] = RecArchive
		}
	default:
		st.step[r.Seq] = r.Type
		if r.DestID != "" {
			st.destID[r.Seq] = r.DestID
		}
	}
}

// Step is the last journaled step of the entry with plan index seq.
func (st *State) Step(seq int64) string { return st.step[seq] }

// done says the entry needs no more work.
func (st *State) done(seq int64) bool {
	switch st.step[seq] {
	case RecRemoved, RecGone, RecSkipped:
		return true
	}
	return false
}

// Counts says how many entries reached each final step.
func (st *State) Counts() (moved, gone, skipped, failed int) {
	for _, e := range st.Plan.Entries {
		switch st.step[e.Seq] {
		case RecRemoved:
			moved++
		case RecGone:
			gone++
		case RecSkipped:
			skipped++
		case RecFailed:
			failed++
		}
	}
	return
}

// MovedByBatch lists, per ended batch of a journal, the entries it moved
// and the DLQ watermark the batch started from.
func MovedByBatch(recs []Record) ([][]Entry, []string) {
	moved := map[int64]Entry{}
	var batches [][]Entry
	var marks []string
	var seqs []int64
	var mark string
	for _, r := range recs {
		switch r.Type {
		case RecRemoved:
			moved[r.Seq] = Entry{Seq: r.Seq, ID: r.ID, EventID: r.EventID, Fingerprint: r.Fingerprint, Dest: r.Dest}
		case RecBatchStart:
			seqs, mark = r.Seqs, r.Note
		case RecBatchEnd:
			var b []Entry
			for _, s := range seqs {
				if e, ok := moved[s]; ok {
					b = append(b, e)
				}
			}
			batches = append(batches, b)
			marks = append(marks, mark)
		}
	}
	return batches, marks
}
