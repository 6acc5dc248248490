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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/report"
)

// BuildInfo is set by the linker (see .goreleaser.yaml).
type BuildInfo struct {
	Version string
	Commit  string
	Date    string
}

// Main runs dlqctl with the process's arguments and streams and returns
// the exit code.
func Main(build BuildInfo) int {
	return MainWith(&Factory{
		IO:     SystemIO(),
		Now:    time.Now,
		Getenv: os.Getenv,
		Build:  build,
	})
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// MainWith runs the process's arguments against f, stopping the command's
// context on Ctrl-C or SIGTERM. A second Ctrl-C kills the process at once.
func MainWith(f *Factory) int {
	// go-redis logs dial retries on its own global logger; every failure
	// reaches the user as a returned error, so the log is only noise.
	redis.SetLogger(quietLogger{})
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
	root := NewRootCmd(f)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	err := root.ExecuteContext(ctx)
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
	f.printError(code, err)
	return code
}

func (f *Factory) printError(code int, err error) {
	msg := err.Error()
	if errors.Is(err, context.Canceled) {
		msg = "interrupted"
	}
	if f.jsonErrors {
		doc := struct {
			Schema  string `json:"schema"`
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{"dlqctl.error/v1", code, msg}
		b, _ := json.Marshal(doc)
		fmt.Fprintln(f.IO.ErrOut, string(b))
		return
	}
	fmt.Fprintln(f.IO.ErrOut, "dlqctl: "+msg)
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

// NewRootCmd builds the command tree.
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "dlqctl",
		Short: "Inspect and safely redrive dead-letter queues",
		Long: `dlqctl lists, categorizes and samples dead-letter queue envelopes on a
directory queue, Redis Streams or Apache Pulsar, and redrives them in small
rate-limited batches, reconciling delivery attempts against effects.

Start with:  dlqctl --source dir:testdata/incident categorize`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(c *cobra.Command, args []string) error {
			return f.resolve(c)
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(ExitUsage, fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath()))
	})
	g := &f.Global
	pf := root.PersistentFlags()
	pf.StringVar(&g.Source, "source", "", "DLQ to read, as a URL: dir:PATH, redis://…?stream=KEY, … (dlqctl docs backends lists them; env DLQCTL_SOURCE)")
	pf.StringVar(&g.Profile, "profile", "", "profile from the config file (env DLQCTL_PROFILE)")
	pf.StringVar(&g.ConfigPath, "config", "", "config file (env DLQCTL_CONFIG; default ./dlqctl.yaml, then $XDG_CONFIG_HOME/dlqctl/config.yaml)")
	pf.StringVarP(&g.Output, "output", "o", "", "output format: table, json, ndjson, markdown (env DLQCTL_OUTPUT)")
	pf.BoolVar(&g.NoColor, "no-color", false, "no colours (also NO_COLOR)")
	pf.DurationVar(&g.Timeout, "timeout", 0, "give up after this long, e.g. 30s (0: no limit)")
	pf.StringVar(&g.Rules, "rules", "", "category rules file (YAML) that extends or replaces the defaults")
	pf.StringVar(&g.EventIDFrom, "event-id-from", "", "Pulsar: where the event ID is: property:NAME, json:PATH or key")

	root.AddCommand(
		newListCmd(f),
		newShowCmd(f),
		newStatsCmd(f),
		newCategorizeCmd(f),
		newSampleCmd(f),
		newCheckCmd(f),
		newExportCmd(f),
		newImportCmd(f),
		newPendingCmd(f),
		newRedriveCmd(f),
		newResolveCmd(f),
		newReconcileCmd(f),
		newQuarantineCmd(f),
		newUICmd(f),
		newVersionCmd(f),
		newDocsCmd(f, root),
	)
	root.InitDefaultCompletionCmd()
	return root
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
