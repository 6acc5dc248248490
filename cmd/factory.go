package cmd

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/report"
)

// Factory is what a command receives from NewRootCmd: the process's
// dependencies, the persistent flags as given, and the settings resolved
// from them for this one invocation. Nothing in this package is global.
// Both parts are embedded so that commands read f.IO and f.source alike.
type Factory struct {
	Deps

	// Global holds the persistent flags as given.
	Global GlobalOptions

	settings
}

// Deps are what the process (main, or a test) gives every command; no
// command changes them.
type Deps struct {
	IO     *IOStreams
	Now    func() time.Time
	Getenv func(string) string
	Build  BuildInfo

	// CrashHook, when set (tests only), is called after every journal step
	// of a redrive with the step's type, to simulate a crash there.
	CrashHook func(step string)

	// Backends are the backends this build knows (main gives
	// backends/all's); required. Tests give the ones they need.
	Backends *backend.Registry
	// Effects opens the effects stores this build knows (--effects); the
	// zero value opens every kind but Redis's, which main plugs in.
	Effects effects.Stores
}

// settings are resolved once per invocation (resolve) from the flags,
// the environment and the config file.
type settings struct {
	config     *Config
	profile    Profile
	source     string
	format     report.Format
	noColor    bool
	jsonErrors bool
	cancel     context.CancelFunc
	jq         *jqFilter
	started    time.Time
	// allowMissing is --allow-missing of the commands that take it.
	allowMissing bool
	// refusesMissing: the command refuses a DLQ that does not exist
	// (unless allowMissing) when it opens it, before any note that it
	// reads as empty.
	refusesMissing bool
	// offersAllowMissing: the command takes --allow-missing (not every
	// command that refuses a missing DLQ does).
	offersAllowMissing bool
}

// GlobalOptions are the flags every command takes (the command contract).
type GlobalOptions struct {
	Source      string
	Profile     string
	ConfigPath  string
	Output      string
	NoColor     bool
	Timeout     time.Duration
	Rules       string
	EventIDFrom string
	KeyFrom     string
	JQ          string
}

func (f *Factory) now() time.Time {
	if f.started.IsZero() {
		// Whole seconds: every time dlqctl prints is RFC 3339 to the second.
		f.started = f.Now().UTC().Truncate(time.Second)
	}
	return f.started
}

// resolve applies flags over env over config, once per invocation.
func (f *Factory) resolve(c *cobra.Command) error {
	g := f.Global
	// The output format decides how errors print, so settle it first.
	out := firstNonEmpty(g.Output, f.Getenv("DLQCTL_OUTPUT"))
	if out != "" {
		format, err := report.ParseFormat(out)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		f.format = format
	}
	f.jsonErrors = f.format == report.FormatJSON || f.format == report.FormatNDJSON
	cfg, err := loadConfig(firstNonEmpty(g.ConfigPath, f.Getenv("DLQCTL_CONFIG")), f.Getenv, f.Backends.ProfileKeys())
	if err != nil {
		return err
	}
	f.config = cfg
	if f.profile, err = cfg.profile(firstNonEmpty(g.Profile, f.Getenv("DLQCTL_PROFILE"))); err != nil {
		return err
	}
	if f.format == "" {
		f.format = report.FormatTable
		if f.profile.Output != "" {
			if f.format, err = report.ParseFormat(f.profile.Output); err != nil {
				return withCode(ExitUsage, fmt.Errorf("profile output: %w", err))
			}
		}
		f.jsonErrors = f.format == report.FormatJSON || f.format == report.FormatNDJSON
	}
	if g.JQ != "" {
		// --jq filters a JSON document, so it asks for one unless -o
		// ndjson was given.
		switch f.format {
		case report.FormatNDJSON:
		case report.FormatJSON, report.FormatTable:
			if g.Output != "" && f.format != report.FormatJSON {
				return usageErrorf("--jq filters JSON: use it with -o json or -o ndjson, not -o %s", f.format)
			}
			f.format = report.FormatJSON
		default:
			return usageErrorf("--jq filters JSON: use it with -o json or -o ndjson, not -o %s", f.format)
		}
		f.jsonErrors = true
		jq, err := compileJQ(g.JQ, f.IO.Out)
		if err != nil {
			return err
		}
		f.jq = jq
		f.IO.Out = &jq.buf
		c.SetOut(f.IO.Out)
	}
	if f.format == report.FormatOpenMetrics && !slices.Contains(formatsFor(c), f.format) {
		return usageErrorf("-o openmetrics is for stats and check only; %s takes table, wide, json, ndjson or markdown", c.Name())
	}
	f.source = firstNonEmpty(g.Source, f.Getenv("DLQCTL_SOURCE"), f.profile.Source)
	// NO_COLOR counts only when non-empty (no-color.org).
	f.noColor = g.NoColor || f.Getenv("NO_COLOR") != ""
	if g.Timeout < 0 {
		return usageErrorf("--timeout %s: must not be negative", g.Timeout)
	}
	if g.Timeout > 0 {
		ctx, cancel := context.WithTimeout(c.Context(), g.Timeout)
		f.cancel = cancel
		c.SetContext(ctx)
	}
	return nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// fieldNames are the Redis/Pulsar field names in effect.
func (f *Factory) fieldNames() envelope.FieldNames {
	names, _ := f.profile.Fields.Complete() // checked when the profile was loaded
	return names
}

// classifier builds the category rules in effect: --rules, else the
// profile's categories, else the config's, else the built-in defaults.
func (f *Factory) classifier() (*envelope.Classifier, error) {
	if f.Global.Rules != "" {
		spec, err := readRulesFile(f.Global.Rules)
		if err != nil {
			return nil, err
		}
		rules, err := spec.Compile(f.Global.Rules)
		if err != nil {
			return nil, withCode(ExitUsage, err)
		}
		return envelope.NewClassifier(rules), nil
	}
	for _, spec := range []*envelope.RulesSpec{f.profile.Categories, f.config.Categories} {
		if spec != nil {
			rules, err := spec.Compile(f.config.path + ": categories")
			if err != nil {
				return nil, withCode(ExitUsage, err)
			}
			return envelope.NewClassifier(rules), nil
		}
	}
	return envelope.NewClassifier(envelope.DefaultRules()), nil
}

// openOptions is what the backends may read from this invocation.
func (f *Factory) openOptions() backend.OpenOptions {
	return backend.OpenOptions{
		Fields:       f.fieldNames(),
		EventIDFrom:  firstNonEmpty(f.Global.EventIDFrom, f.profile.EventIDFrom),
		KeyFrom:      firstNonEmpty(f.Global.KeyFrom, f.profile.KeyFrom),
		Getenv:       f.Getenv,
		Secret:       f.profile.secret,
		AllowMissing: f.allowMissing,
		Stderr:       f.IO.ErrOut,
	}
}

// openSource opens the DLQ named by --source, DLQCTL_SOURCE or the profile.
func (f *Factory) openSource(ctx context.Context) (backend.Source, error) {
	return sourcesFor(f).OpenSource(ctx, f.source)
}
