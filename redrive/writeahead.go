package redrive

// commit is the order every step follows: journal the records (one sync),
// then update the state, then the crash hook (tests) for step. No side
// effect runs before commit returns. An empty step calls no hook. Records
// held for the next write (hold) are written first, in the same sync.
func (e *Engine) commit(st *State, step string, recs ...Record) error {
	if len(recs) > 0 && len(e.pending) > 0 {
		held := e.pending
		if err := e.Journal.AppendAll(append(held, recs...)); err != nil {
			return err
		}
		e.pending = nil
		e.heard(held)
	} else if err := e.Journal.AppendAll(recs); err != nil {
		return err
	}
	for _, r := range recs {
		st.note(r)
	}
	if step != "" {
		e.crash(step)
	}
	return nil
}

// hold keeps records for the engine's next journal write instead of
// syncing them now, and notes them in the state at once. Only records no
// side effect waits on are held: a batch's start (nothing is sent before
// its intents, written with it), the last chunk's results of an atomic
// mover, and a passed batch's end (the next batch's first write carries
// it, before that batch sends anything). A crash before that write leaves
// the journal as a crash a moment earlier would have: the batch open with
// its entries' intents, which resume settles against the backend and
// reconciles again, gate included. flush writes them before any side
// effect, and Run's last write carries what is left. See
// docs/decisions.md, "Journal syncs and reads per batch".
func (e *Engine) hold(st *State, recs ...Record) {
	for _, r := range recs {
		st.note(r)
		e.pending = append(e.pending, r)
	}
}

// flush writes the held records, if any, alone.
func (e *Engine) flush() error {
	if len(e.pending) == 0 {
		return nil
	}
	held := e.pending
	if err := e.Journal.AppendAll(held); err != nil {
		return err
	}
	e.pending = nil
	e.heard(held)
	return nil
}

// heard calls the crash hook (tests) once for each kind of record a write
// carried that was held: a crash "after batch-end" then finds what the
// same write also made durable, as a real crash there would.
func (e *Engine) heard(held []Record) {
	seen := map[string]bool{}
	for _, r := range held {
		t := r.Type
		if isStep(t) {
			t = RecPublished
		}
		if !seen[t] {
			seen[t] = true
			e.crash(t)
		}
	}
}
