package cmd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/dirqueue"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/pulsardlq"
	"github.com/dlqctl/dlqctl/redisstream"
	"github.com/dlqctl/dlqctl/report"
)

// Factory carries one invocation's dependencies and resolved settings.
// Commands receive it from NewRootCmd; nothing in this package is global.
type Factory struct {
	IO     *IOStreams
	Now    func() time.Time
	Getenv func(string) string
	Build  BuildInfo

	// CrashHook, when set (tests only), is called after every journal step
	// of a redrive with the step's type, to simulate a crash there.
	CrashHook func(step string)

	// Global holds the persistent flags as given.
	Global GlobalOptions

	config     *Config
	profile    Profile
	source     string
	format     report.Format
	noColor    bool
	jsonErrors bool
	cancel     context.CancelFunc
	started    time.Time
}

// GlobalOptions are the flags every command takes (SPEC §5).
type GlobalOptions struct {
	Source      string
	Profile     string
	ConfigPath  string
	Output      string
	NoColor     bool
	Timeout     time.Duration
	Rules       string
	EventIDFrom string
}

func (f *Factory) now() time.Time {
	if f.started.IsZero() {
		f.started = f.Now().UTC()
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
	cfg, err := loadConfig(firstNonEmpty(g.ConfigPath, f.Getenv("DLQCTL_CONFIG")), f.Getenv)
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
	f.source = firstNonEmpty(g.Source, f.Getenv("DLQCTL_SOURCE"), f.profile.Source)
	_, noColorEnv := os.LookupEnv("NO_COLOR")
	if f.Getenv("NO_COLOR") != "" {
		noColorEnv = true
	}
	f.noColor = g.NoColor || noColorEnv
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
// profile's categories, else the config's, else SPEC §4's defaults.
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

// openSource opens the DLQ named by --source, DLQCTL_SOURCE or the profile.
func (f *Factory) openSource(ctx context.Context) (backend.Source, error) {
	src := f.source
	if src == "" {
		return nil, usageErrorf("no source: give --source (e.g. --source dir:testdata/incident), set DLQCTL_SOURCE, or choose a --profile")
	}
	scheme, rest, _ := strings.Cut(src, ":")
	switch scheme {
	case "dir":
		return dirqueue.Open(rest)
	case "redis", "rediss":
		return redisstream.Open(ctx, src, redisstream.Options{
			Fields:   f.fieldNames(),
			Password: firstNonEmpty(f.Getenv("DLQCTL_REDIS_PASSWORD"), f.profile.RedisPassword),
		})
	case "pulsar", "pulsar+ssl":
		token, err := f.pulsarToken()
		if err != nil {
			return nil, err
		}
		from, err := envelope.ParseEventIDSource(firstNonEmpty(f.Global.EventIDFrom, f.profile.EventIDFrom))
		if err != nil {
			return nil, withCode(ExitUsage, err)
		}
		t, err := pulsardlq.Open(ctx, src, pulsardlq.Options{Token: token, Fields: f.fieldNames(), EventIDFrom: from})
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, usageErrorf("source %q: unknown scheme %q (want dir:, redis://, rediss://, pulsar:// or pulsar+ssl://)", redactURL(src), scheme)
}

// pulsarToken is DLQCTL_PULSAR_TOKEN, else the content of the file named by
// DLQCTL_PULSAR_TOKEN_FILE (surrounding white space trimmed), else the
// profile's pulsar_token; "" for none.
func (f *Factory) pulsarToken() (string, error) {
	if tok := f.Getenv("DLQCTL_PULSAR_TOKEN"); tok != "" {
		return tok, nil
	}
	if path := f.Getenv("DLQCTL_PULSAR_TOKEN_FILE"); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", usageErrorf("DLQCTL_PULSAR_TOKEN_FILE: %v", err)
		}
		tok := strings.TrimSpace(string(raw))
		if tok == "" {
			return "", usageErrorf("DLQCTL_PULSAR_TOKEN_FILE: %s is empty", path)
		}
		return tok, nil
	}
	return f.profile.PulsarToken, nil
}

// redactURL hides a password in a URL that could not be parsed by a backend.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	userinfo := rest[:at]
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx" + rest[at:]
	}
	return s
}
