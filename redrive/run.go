package redrive

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
)

// SourceOpener opens the DLQ a run is on, by its source URL, with what
// the invocation gives the backends (credentials, field names).
type SourceOpener interface {
	OpenSource(ctx context.Context, url string) (backend.Source, error)
}

// EffectsOpener opens the effects store a redrive reconciles against;
// query is the plan's custom store query ("" for none).
type EffectsOpener interface {
	OpenEffects(ctx context.Context, url, query string) (effects.Probe, error)
}

// Runner runs plans. It owns a run's write-ahead sequence: the journal's
// lock, the DLQ's lease, the checks against the DLQ, the journal and its
// chain, and the engine, each in its order; what it is given is plain
// values. The caller judges the approvals first and says how the run
// went after.
type Runner struct {
	// Sources opens the run's source; Effects its effects store.
	Sources SourceOpener
	Effects EffectsOpener
	// Now is the clock of the journal, the lease and the engine.
	Now func() time.Time
	// Notes receives what an operator should know as the run goes, a line
	// each: a DLQ without a lease, a lost lease, moves weaker than usual,
	// where the journal is. nil discards them.
	Notes io.Writer
	// Observer hears the run's progress and batches; when it is a
	// RunWatcher it is shown the run before the engine takes it up.
	Observer Observer
	// Crash, in tests only, is called after each journal step with the
	// record type (Engine.Crash).
	Crash func(step string)
}

// RunWatcher is an Observer shown the run before the engine takes it up:
// where it stands (a resumed run's batches) and the engine, whose effects
// probe and sleep it may wrap to show a settle countdown.
type RunWatcher interface {
	Observer
	Begin(st *State, eng *Engine)
}

// ApplyRequest is a plan whose approvals hold, and how to run it.
type ApplyRequest struct {
	Plan *Plan
	// PlanPath is where the plan is (recorded in the run-start);
	// JournalPath is where the run's journal goes.
	PlanPath, JournalPath string
	// Source is the source URL to open: it must be the plan's.
	Source string
	// Started names the run (with a random suffix).
	Started time.Time
	// AppliedBy is who runs it, and Approvals what it runs under (both
	// recorded in the run-start).
	AppliedBy string
	Approvals []Approval
	// Key is the approval key the journal is chained with; nil for a
	// signed run, or a one-step run without one, whose journal is not
	// chained.
	Key []byte
	// SkipMissing goes on without entries that left the DLQ or changed
	// (journaled as gone and skipped); else such a plan is refused.
	SkipMissing bool
	// EffectsURL is the effects URL with its password, when the plan's
	// has one hidden ("": the plan's).
	EffectsURL string
}

// ResumeRequest is a run whose journal was read and believed, and which
// may go on.
type ResumeRequest struct {
	// State is the run as its journal says; JournalPath the journal, whose
	// lock the caller holds (LockExistingJournal) since it read it.
	State       *State
	JournalPath string
	// Source is the source URL to open: it must be the run's.
	Source string
	// Key is the approval key the journal is chained with (nil: not
	// chained), and Verified how far its chain verified.
	Key      []byte
	Verified Verified
	// ResumedBy is who goes on with it; Fresh the approvals it goes on
	// under when they are not those it started with (nil: those).
	ResumedBy string
	Fresh     []Approval
	// RetryFailed tries the entries whose move failed once more.
	RetryFailed bool
	// EffectsURL is as in ApplyRequest.
	EffectsURL string
}

// Ran is a run that reached its engine, and how it ended.
type Ran struct {
	State *State
	// Err is what stopped the engine before the end (ErrInterrupted,
	// ErrDeadline, a backend error); nil when the run ended by itself,
	// completed or halted by a gate (State.Status).
	Err error
	// Release is what failed in giving the DLQ lease back after the run
	// (AfterRelease says it after the outcome).
	Release error
}

// StartedError refuses to apply a plan whose journal exists: its run has
// started, and only resume may go on with it. State is the run as the
// journal says (nil when it could not be read: Err says why).
type StartedError struct {
	Journal string
	State   *State
	Err     error
}

func (e *StartedError) Error() string {
	return fmt.Sprintf("journal %s exists: this plan's run has started already", e.Journal)
}

// StaleError refuses a plan some of whose entries left the DLQ
// (Missing) or carry another fingerprint now (Changed). Unseen is how many
// messages the scan could not see (SQS: in flight), among which the
// missing ones may be.
type StaleError struct {
	Planned          int
	Missing, Changed []Entry
	Unseen           int64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("plan is stale: %d of its %d entries left the DLQ, %d changed", len(e.Missing), e.Planned, len(e.Changed))
}

// Apply runs a plan whose approvals hold, from its journal's lock to the
// engine's end. It returns an error when the run did not start: the
// journal or the DLQ is held by another run (*backend.BusyError), the
// plan's run started already (*StartedError), the source is not the
// plan's (*backend.ConfigError), or the plan is stale (*StaleError).
//
// The order is the write-ahead rule's: nothing is read from the DLQ before
// this process holds the journal, nothing is moved before it holds the
// DLQ, and the run-start is journaled before the first move.
func (r Runner) Apply(ctx context.Context, q ApplyRequest) (*Ran, error) {
	plan := q.Plan
	runID := NewRunID(q.Started, randomSuffix())
	lock, err := LockJournal(q.JournalPath, backend.ThisProcess(runID, r.Now().UTC()))
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if err := r.restartNeverStarted(q.JournalPath); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(q.JournalPath); err == nil {
		// The run started: whatever left the DLQ since was most likely
		// moved by it, and only the journal knows. Checked before the plan
		// is compared with the DLQ, which would call it stale.
		st, _, err := ReplayFile(q.JournalPath, nil, plan)
		return nil, &StartedError{Journal: q.JournalPath, State: st, Err: err}
	}
	src, err := r.openRunSource(ctx, q.Source, plan.Source, "the plan was made for")
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return r.leased(ctx, src, runID, func(ctx context.Context) (*Ran, error) {
		missing, changed, err := Stale(ctx, src, plan)
		if err != nil {
			return nil, err
		}
		if err := refuseStale(src, plan, missing, changed, q.SkipMissing); err != nil {
			return nil, err
		}
		eng, closeEng, err := r.engine(ctx, src, plan, q.EffectsURL)
		if err != nil {
			return nil, err
		}
		defer closeEng()
		j, err := CreateJournal(q.JournalPath, r.Now)
		if err != nil {
			return nil, err
		}
		defer j.Close()
		eng.Journal = j
		if len(q.Key) > 0 {
			j.Chain(JournalKey(q.Key, runID), "")
		}
		st, err := eng.Start(runID, plan, q.PlanPath, src.String(), q.AppliedBy, q.Approvals)
		if err != nil {
			return nil, err
		}
		if err := eng.MarkStale(st, missing, changed); err != nil {
			return nil, err
		}
		r.noteWeakMoves(src, plan)
		fmt.Fprintf(r.notes(), "run %s: %s, journal %s\n", runID, entries(plan.Entries.Len()), q.JournalPath)
		return r.run(ctx, eng, st), nil
	})
}

// LockExistingJournal takes the lock of a journal that a resume is about
// to read; call unlock when the run is over. A journal that is not there
// is left for the journal reader to report, rather than leaving a stray
// lock file behind.
func (r Runner) LockExistingJournal(path string) (unlock func(), err error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	l, err := LockJournal(path, backend.ThisProcess("", r.Now().UTC()))
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Unlock() }, nil
}

// Resume goes on with a run where its journal says it stopped: it opens
// the run's source, leases its DLQ and runs the rest of the plan,
// journaled in the run's journal (chained on from where it verified). It
// returns an error when the run did not go on: the DLQ is held by another
// run (*backend.BusyError) or the source is not the run's
// (*backend.ConfigError).
func (r Runner) Resume(ctx context.Context, q ResumeRequest) (*Ran, error) {
	st := q.State
	src, err := r.openRunSource(ctx, q.Source, st.Plan.Source, "the run was on")
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return r.leased(ctx, src, st.RunID, func(ctx context.Context) (*Ran, error) {
		eng, closeEng, err := r.engine(ctx, src, st.Plan, q.EffectsURL)
		if err != nil {
			return nil, err
		}
		defer closeEng()
		var j *Journal
		if q.Key != nil {
			j, err = OpenVerifiedJournal(q.JournalPath, r.Now, JournalKey(q.Key, st.RunID), q.Verified)
		} else {
			j, err = OpenJournal(q.JournalPath, r.Now)
		}
		if err != nil {
			return nil, err
		}
		defer j.Close()
		eng.Journal = j
		if err := eng.Resume(st, q.ResumedBy, q.Fresh); err != nil {
			return nil, err
		}
		if q.RetryFailed {
			if n := st.RetryFailed(); n > 0 {
				fmt.Fprintf(r.notes(), "trying %s that failed once more\n", entries(n))
			}
		}
		r.noteWeakMoves(src, st.Plan)
		fmt.Fprintf(r.notes(), "resuming run %s from %s\n", st.RunID, q.JournalPath)
		return r.run(ctx, eng, st), nil
	})
}

// openRunSource opens url and checks that it is the source the run was
// planned for (want, as the plan shows it).
func (r Runner) openRunSource(ctx context.Context, url, want, wanted string) (backend.Source, error) {
	src, err := r.Sources.OpenSource(ctx, url)
	if err != nil {
		return nil, err
	}
	if src.String() != want {
		src.Close()
		return nil, backend.Configf("%s %s, but the source is %s", wanted, want, src)
	}
	return src, nil
}

// leased runs fn under the DLQ's lease, with a context that ends when the
// lease is lost, and gives the lease back after it, however it ends: what
// failed in that is said after fn's error, or kept in Ran.Release.
func (r Runner) leased(ctx context.Context, src backend.Source, runID string, fn func(context.Context) (*Ran, error)) (ran *Ran, err error) {
	lctx, release, err := LeaseDLQ(ctx, src, backend.ThisProcess(runID, r.Now().UTC()), r.notes())
	if err != nil {
		return nil, err
	}
	defer func() {
		relErr := release()
		switch {
		case err != nil:
			err = AfterRelease(r.notes(), err, relErr)
		case ran != nil:
			ran.Release = relErr
		}
	}()
	return fn(lctx)
}

// run shows the run to the observer and runs the engine.
func (r Runner) run(ctx context.Context, eng *Engine, st *State) *Ran {
	if w, ok := eng.Observer.(RunWatcher); ok {
		w.Begin(st, eng)
	}
	return &Ran{State: st, Err: eng.Run(ctx, st)}
}

// engine builds the engine for plan over src: its mover, rate limiter and
// effects store (checked to be the plan's).
func (r Runner) engine(ctx context.Context, src backend.Source, plan *Plan, effectsURL string) (*Engine, func(), error) {
	mover, ok := src.(backend.Mover)
	if !ok {
		return nil, nil, backend.Configf("%s: this backend cannot move entries", src)
	}
	eng := &Engine{Source: src, Mover: mover, Now: r.Now, Observer: r.Observer, Crash: r.Crash}
	closeFn := func() {}
	if plan.Kind == KindRedrive {
		if plan.Params.Rate > 0 {
			eng.Limiter = rate.NewLimiter(rate.Limit(plan.Params.Rate), plan.Params.Burst)
		}
		if plan.Params.Effects != "" {
			url := plan.Params.Effects
			if effectsURL != "" {
				url = effectsURL
			}
			probe, err := r.Effects.OpenEffects(ctx, url, plan.Params.EffectsQuery)
			if err != nil {
				return nil, nil, err
			}
			if probe.String() != plan.Params.Effects {
				probe.Close()
				return nil, nil, backend.Configf("--effects %s is not the plan's %s", probe, plan.Params.Effects)
			}
			eng.Probe = probe
			closeFn = func() { probe.Close() }
		}
	}
	return eng, closeFn, nil
}

// refuseStale refuses a plan some of whose entries left the DLQ or
// changed, unless skipMissing; with every entry gone, always.
func refuseStale(src backend.Source, plan *Plan, missing, changed []Entry, skipMissing bool) error {
	allGone := len(missing) == plan.Entries.Len() && len(missing) > 0 // --skip-missing would go on with nothing
	if !allGone && (skipMissing || len(missing)+len(changed) == 0) {
		return nil
	}
	e := &StaleError{Planned: plan.Entries.Len(), Missing: missing, Changed: changed}
	if u, ok := src.(backend.UnseenCounter); ok {
		e.Unseen = u.Unseen()
	}
	return e
}

// restartNeverStarted removes a journal whose run never started (its
// run-start record torn by a crash, before anything moved), so that apply
// starts the run again, as resume advises for it.
func (r Runner) restartNeverStarted(journalPath string) error {
	never, err := NeverStarted(journalPath)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !never) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(journalPath); err != nil {
		return err
	}
	fmt.Fprintf(r.notes(), "journal %s holds no complete record: a crash tore its run-start before anything was moved; starting the run again\n", journalPath)
	return nil
}

// noteWeakMoves says where the backend cannot move to a destination as
// strongly as usual (Redis Cluster: DLQ and destination in different hash
// slots take a journaled two-step move instead of one atomic script).
func (r Runner) noteWeakMoves(src backend.Source, plan *Plan) {
	n, ok := src.(backend.MoveNoter)
	if !ok {
		return
	}
	seen := map[string]bool{}
	for e := range plan.Entries.All() {
		if e.Dest != "" && !seen[e.Dest] {
			seen[e.Dest] = true
			if note := n.MoveNote(e.Dest); note != "" {
				fmt.Fprintln(r.notes(), "dlqctl: note: "+note)
			}
		}
	}
}

func (r Runner) notes() io.Writer {
	if r.Notes == nil {
		return io.Discard
	}
	return r.Notes
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%x", b)
}
