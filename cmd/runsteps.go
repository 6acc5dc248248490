package cmd

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redrive"
)

// runSteps are the steps a run goes through once it may run (resume, and
// apply past its approvals): locking the journal, leasing the DLQ,
// building and running the engine, and saying how it ended. They are
// function fields so that a run function takes them as plain values, as
// gh passes HttpClient; the Factory gives its own (Factory.runSteps).
type runSteps struct {
	// LockJournal locks the journal of a run about to start.
	LockJournal func(path, runID string) (func(), error)
	// StartedAlready is the error for a plan whose journal exists: resume
	// it, or it was applied already.
	StartedAlready func(ctx context.Context, plan *redrive.Plan, planPath, journal string, hint hintFlags) error
	// LockExistingJournal locks a journal that is there (a missing one is
	// left for the journal reader to report).
	LockExistingJournal func(path string) (func(), error)
	// LeaseDLQ takes the DLQ lease for a run; the context ends when the
	// lease is lost.
	LeaseDLQ func(ctx context.Context, src backend.Source, runID string) (context.Context, func() error, error)
	// ReleaseAfter gives the lease back and says what failed after the
	// run's own error.
	ReleaseAfter func(runErr error, release func() error) error
	// Engine builds the engine for a plan over src.
	Engine func(ctx context.Context, src backend.Source, plan *redrive.Plan, effectsURL string) (*redrive.Engine, func(), error)
	// FinishRun runs the engine and turns the outcome into output and an
	// exit code.
	FinishRun func(ctx context.Context, eng *redrive.Engine, st *redrive.State, journalPath string, hint hintFlags) error
	// PrintRun writes a run document in the output format.
	PrintRun func(RunDoc) error
	// HaltError is the error of a run a gate halted, with what to do.
	HaltError func(ctx context.Context, st *redrive.State, doc RunDoc, planPath, journal string, hint hintFlags) error
}

// runSteps are the Factory's own run steps.
func (f *Factory) runSteps() runSteps {
	return runSteps{
		LockJournal: f.lockJournal, StartedAlready: f.startedAlready,
		LockExistingJournal: f.lockExistingJournal, LeaseDLQ: f.leaseDLQ, ReleaseAfter: f.releaseAfter,
		Engine: f.engine, FinishRun: f.finishRun, PrintRun: f.printRun, HaltError: f.haltError,
	}
}

// complete says that every run step is there (the options tests check
// that a command gives them all).
func (s runSteps) complete() bool {
	return s.LockJournal != nil && s.StartedAlready != nil && s.LockExistingJournal != nil && s.LeaseDLQ != nil && s.ReleaseAfter != nil && s.Engine != nil &&
		s.FinishRun != nil && s.PrintRun != nil && s.HaltError != nil
}
