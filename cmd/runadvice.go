package cmd

import (
	"context"
	"time"

	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
)

// runAdvice is how apply, resume and approve say how a run went and what
// to do next (runOutput): the run document, the exit code and advice of a
// run that did not complete, the command lines to go on with, and what
// came back to the DLQ.
type runAdvice struct {
	io *IOStreams
	// report are the output settings of the data stream.
	report func() report.Options
	// now is the clock; started is when the invocation started (the start
	// of a run this process began).
	now, started func() time.Time
	lines        commandLines
	// replan is the re-plan of the events ids that came back in the run
	// st of the plan at planPath, reading the run's DLQ.
	replan func(ctx context.Context, st *redrive.State, planPath string, ids []string) replan
}

// runAdviceFor is the runAdvice of the invocation f.
func runAdviceFor(f *Factory) runAdvice {
	return runAdvice{io: f.IO, report: f.reportOptions, now: f.Now, started: f.now,
		lines: commandLines{global: f.Global, backends: f.Backends}, replan: replannerFor(f).planReplan}
}
