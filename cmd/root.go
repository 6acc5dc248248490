// Package cmd holds dlqctl's commands. Each command is built by a
// constructor that receives a *Factory; its RunE checks flags and calls a
// plain run function that tests can call directly.
package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/internal/tuning"
	"github.com/dlqctl/dlqctl/report"
)

// BuildInfo is set by the linker (see .goreleaser.yaml).
type BuildInfo struct {
	Version string
	Commit  string
	Date    string
}

// MainWith runs the process's arguments against f, stopping the command's
// context on Ctrl-C or SIGTERM. A second Ctrl-C kills the process at once.
func MainWith(f *Factory) int {
	needBackends(f)
	f.Backends.Setup()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	f.Build = fillBuildInfo(f.Build)
	return Execute(ctx, f, os.Args[1:])
}

// Execute runs one command line against f and returns the exit code. Tests
// call it with TestIO streams.
func Execute(ctx context.Context, f *Factory, args []string) int {
	// A command may pace the collector or bound the heap: a caller that
	// runs commands in its own process gets its settings back.
	defer tuning.Capture()()
	root := NewRootCmd(f)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	err := root.ExecuteContext(ctx)
	if f.jq != nil {
		// What the command wrote, even when it failed (check's exit 4),
		// is still its answer.
		f.IO.Out = f.jq.out
		if jqErr := f.jq.flush(ctx); jqErr != nil && err == nil {
			err = jqErr
		}
	}
	if f.cancel != nil {
		f.cancel()
	}
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	if ctx.Err() != nil && code == ExitError {
		code = ExitInterrupted
	}
	printError(f.IO, f.jsonErrors || asksForJSON(f.Global, f.Getenv, args), code, err)
	return code
}

// printError writes the error a command ended with to io's stderr: a
// dlqctl.error/v1 document when the output is JSON (asJSON), else a
// line of prose.
func printError(io *IOStreams, asJSON bool, code int, err error) {
	msg := err.Error()
	if errors.Is(err, context.Canceled) {
		msg = "interrupted"
	}
	if asJSON {
		doc := struct {
			Schema  string `json:"schema"`
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{"dlqctl.error/v1", code, msg}
		b, _ := json.Marshal(doc)
		fmt.Fprintln(io.ErrOut, string(b))
		return
	}
	text := "dlqctl: " + msg
	if io.ErrTTY {
		// Prose fits the terminal; commands to copy stay whole lines.
		text = report.WrapProse(text, io.ErrWidth)
	}
	fmt.Fprintln(io.ErrOut, text)
}

func fillBuildInfo(b BuildInfo) BuildInfo {
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					b.Commit = s.Value
				case "vcs.time":
					if b.Date == "" {
						b.Date = s.Value
					}
				}
			}
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

// needBackends panics on a Factory without backends: a program that runs
// commands must say which backends it was built with (main.go).
func needBackends(f *Factory) {
	if f.Backends == nil {
		panic("cmd: Deps.Backends is nil: give the registry of the backends this build holds")
	}
}

// NewRootCmd builds the command tree.
func NewRootCmd(f *Factory) *cobra.Command {
	needBackends(f)
	root := &cobra.Command{
		Use:   "dlqctl",
		Short: "Inspect and safely redrive dead-letter queues",
		Long: strings.Join(report.TUIWrap("dlqctl lists, categorizes and samples dead-letter queue envelopes on "+
			f.Backends.Titles()+", and redrives them in small rate-limited batches, reconciling delivery "+
			"attempts against effects.", 76), "\n") + `

Start with:  dlqctl --source dir:testdata/incident categorize`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(c *cobra.Command, args []string) error {
			return f.resolve(c)
		},
	}
	root.SetUsageFunc(usageFunc(f))
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(ExitUsage, fmt.Errorf("%w%s\nRun '%s --help' for usage.", err, flagHint(c, err), c.CommandPath()))
	})
	g := &f.Global
	pf := root.PersistentFlags()
	pf.StringVar(&g.Source, "source", "", "DLQ to read, as a URL: dir:PATH, redis://…?stream=KEY, … (dlqctl docs backends lists them; env DLQCTL_SOURCE)")
	pf.StringVar(&g.Profile, "profile", "", "profile from the config file (env DLQCTL_PROFILE)")
	pf.StringVar(&g.ConfigPath, "config", "", "config file (env DLQCTL_CONFIG; default ./dlqctl.yaml, then $XDG_CONFIG_HOME/dlqctl/config.yaml)")
	pf.StringVarP(&g.Output, "output", "o", "", "output format: table, wide, json, ndjson, markdown; stats and check also openmetrics (env DLQCTL_OUTPUT)")
	pf.BoolVar(&g.NoColor, "no-color", false, "no colours (also a non-empty NO_COLOR)")
	pf.StringVar(&g.JQ, "jq", "", "filter the JSON output with a jq expression, e.g. '.items[].id' (implies -o json)")
	pf.DurationVar(&g.Timeout, "timeout", 0, "give up after this long, e.g. 30s (0: no limit)")
	pf.StringVar(&g.Rules, "rules", "", "category rules file (YAML) that extends or replaces the defaults")
	pf.StringVar(&g.EventIDFrom, "event-id-from", "", "where the event ID is, "+f.Backends.EventIDFromHelp())
	keyFromHelp := "where the order key is: no backend of this build takes it"
	if h := f.Backends.KeyFromHelp(); h != "" {
		keyFromHelp = "where the order key is, " + h + "; other backends refuse it"
	}
	pf.StringVar(&g.KeyFrom, "key-from", "", keyFromHelp)

	root.AddCommand(
		refusingMissing(f, newListCmd(f, nil), true),
		refusingMissing(f, newShowCmd(f, nil), false),
		newStatsCmd(f, nil),
		refusingMissing(f, newCategorizeCmd(f, nil), true),
		refusingMissing(f, newSampleCmd(f, nil), true),
		newCheckCmd(f, nil),
		refusingMissing(f, newExportCmd(f, nil), true),
		newImportCmd(f, nil),
		newPendingCmd(f, nil),
		newRedriveCmd(f),
		newResolveCmd(f),
		newReconcileCmd(f, nil),
		newQuarantineCmd(f, nil),
		newDLQCmd(f, nil),
		refusingMissing(f, newUICmd(f, nil), false),
		newDoctorCmd(f, nil),
		newVersionCmd(f, nil),
		newDocsCmd(f, root, nil, nil),
	)
	root.InitDefaultCompletionCmd()
	bashCompletion(root)
	registerCompletions(f, root)
	addExamples(root)
	usageArgs(root)
	return root
}

// usageArgs makes every argument error a usage error (exit 2): a missing
// or extra argument, and an unknown command at any level, which cobra
// would otherwise report as a plain error or, under a group, not at all.
func usageArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
	// Cobra leaves the distance at 0 for SuggestionsFor, which then offers
	// only prefixes: "lsit" would get no "did you mean list".
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = suggestDistance
	}
	if !c.Runnable() && c.HasSubCommands() {
		// A group without a command of its own shows its help, but an
		// unknown subcommand under it is an error, not help and exit 0.
		c.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
	}
	if c.Args == nil && (c.HasSubCommands() || !c.HasParent()) {
		c.Args = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			return fmt.Errorf("%s%s\nRun '%s --help' for usage.", msg, didYouMean(c, args[0]), c.CommandPath())
		}
	}
	if c.Args == nil {
		return
	}
	check := c.Args
	c.Args = func(c *cobra.Command, args []string) error {
		err := check(c, args)
		if err != nil && !strings.Contains(err.Error(), "--help") {
			// A command that runs on its own (redrive) and has subcommands
			// takes a mistyped subcommand for an argument.
			hint := ""
			if c.HasSubCommands() && len(args) > 0 {
				hint = didYouMean(c, args[0])
			}
			err = fmt.Errorf("%s: %w%s\nUsage: %s", strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "), err, hint, c.UseLine())
		}
		return withCode(ExitUsage, err)
	}
}

// didYouMean is cobra's suggestion text for a mistyped subcommand of c,
// or "".
func didYouMean(c *cobra.Command, typed string) string {
	if s := c.SuggestionsFor(typed); len(s) > 0 {
		return "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return ""
}

// reportOptions are the output settings for the data stream.
func (f *Factory) reportOptions() report.Options {
	return report.Options{
		Format:  f.format,
		TTY:     f.IO.OutTTY,
		NoColor: f.noColor,
		Width:   f.IO.Width,
		Now:     f.now(),
	}
}

// asksForJSON says whether the command line asked for JSON output when the
// command failed before its settings were resolved (an unknown flag, a
// missing argument): a script in JSON mode still gets dlqctl.error/v1.
func asksForJSON(g GlobalOptions, getenv func(string) string, args []string) bool {
	out := firstNonEmpty(g.Output, getenv("DLQCTL_OUTPUT"))
	if g.JQ != "" {
		return true
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		switch {
		case (a == "-o" || a == "--output") && i+1 < len(args):
			out = args[i+1]
		case strings.HasPrefix(a, "--output="):
			out = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			out = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		case a == "--jq" || strings.HasPrefix(a, "--jq="):
			return true
		}
	}
	return report.Format(out).IsJSON()
}
