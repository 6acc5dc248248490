package cmd

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/redrive"
)

// runOutput is how a command says how a run went: the run document, and
// the error (with its exit code and the advice that goes with it) of a
// run that did not complete. runAdvice's repeats the global flags in
// effect in every command it prints.
type runOutput interface {
	// finishRun says how a run that reached its engine went. The context
	// is for the advice, which reads the DLQ to see what came back.
	finishRun(ctx context.Context, ran *redrive.Ran, journalPath string, hint hintFlags) error
	// startedAlready is apply's answer when the plan's journal exists.
	startedAlready(ctx context.Context, plan *redrive.Plan, planPath string, started *redrive.StartedError, hint hintFlags) error
	// printRun writes a run document in the output format.
	printRun(RunDoc) error
	// haltError is the error of a run a gate halted, with what to do.
	haltError(ctx context.Context, st *redrive.State, doc RunDoc, planPath, journal string, hint hintFlags) error
}

// runnerFor is the redrive.Runner of the invocation f: sources and
// effects stores opened with its settings, its clock, stderr for the
// run's notes, the run view, and the tests' crash hook.
func runnerFor(f *Factory) redrive.Runner {
	return redrive.Runner{Sources: sourcesFor(f), Effects: effectsFor(f.Deps), Now: f.Now, Notes: f.IO.ErrOut,
		Observer: newRunView(f.IO, f.format, f.reportOptions, f.Now), Crash: f.CrashHook}
}

// sourceOpener opens source URLs with the settings of an invocation: the
// backends of this build and what they may read (field names, event ID
// and key forms, the environment and the profile's secrets).
type sourceOpener struct {
	backends *backend.Registry
	opts     backend.OpenOptions
	getenv   func(string) string
}

// sourcesFor is the sourceOpener of the invocation f.
func sourcesFor(f *Factory) sourceOpener {
	return sourceOpener{backends: f.Backends, opts: f.openOptions(), getenv: f.Getenv}
}

// OpenSource opens the DLQ at url.
func (s sourceOpener) OpenSource(ctx context.Context, url string) (backend.Source, error) {
	if url == "" {
		return nil, usageErrorf("no source: give --source (e.g. --source dir:testdata/incident), set DLQCTL_SOURCE, or choose a --profile")
	}
	if reg, err := s.backends.Lookup(url); err == nil {
		paceCollector(reg, s.getenv)
	}
	// A source recorded by a plan or a journal hides its password; the
	// backend's variable gives it.
	raw, err := withHiddenPassword(url, s.backends.PasswordEnv(url), "source", s.getenv)
	if err != nil {
		return nil, err
	}
	return s.backends.Open(ctx, raw, s.opts)
}

// effectsOpener opens the effects stores of this build, with the
// password from the environment for a URL that carries none.
type effectsOpener struct {
	stores   effects.Stores
	password string
}

// effectsFor is the effectsOpener of the process's dependencies d.
func effectsFor(d Deps) effectsOpener {
	return effectsOpener{stores: d.Effects, password: d.Getenv("DLQCTL_EFFECTS_PASSWORD")}
}

// OpenEffects opens the effects store at url; query is the custom
// PostgreSQL query ("" for the default).
func (e effectsOpener) OpenEffects(ctx context.Context, url, query string) (effects.Probe, error) {
	// A URL recorded by a plan hides its password; the variable gives it.
	url, err := withHiddenPassword(url, effectsPasswordEnv, "effects", func(string) string { return e.password })
	if err != nil {
		return nil, err
	}
	return e.stores.Open(ctx, url, effects.Options{Query: query, Password: e.password})
}

// complete says that the runner can open a source and an effects store,
// has a clock and says how its run went (the options tests check that a
// command gives it all).
func (p planRunner) complete() bool {
	return p.Runner.Sources != nil && p.Runner.Effects != nil && p.Runner.Now != nil && p.Runner.Notes != nil && p.Runner.Observer != nil && p.Out != nil
}
