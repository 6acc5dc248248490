package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/report"
	"github.com/dlqctl/dlqctl/trust"
)

// doctorOptions is what doctor checks and with what: the flags, the
// settings resolved for the invocation, and the few things it calls out
// to (the source, the effects store, the category rules), which a test
// may give as its own.
type doctorOptions struct {
	IO     *IOStreams
	Report report.Options
	// ConfigPath is the config file in effect ("" when none).
	ConfigPath string
	// SourceForm is how a source of the source's backend is written (its
	// usage), for the fixes that ask to correct it.
	SourceForm string
	// Policy and Keys are the approval policy and where keys and signers
	// come from (--key-file and --allowed-signers over the environment).
	Policy trust.Policy
	Keys   trust.Keys

	// Rules compiles the category rules in effect.
	Rules func() error
	// OpenSource opens the source in effect.
	OpenSource func(context.Context) (backend.Source, error)
	// OpenProbe opens an effects store (--effects).
	OpenProbe func(ctx context.Context, url, query string) (effects.Probe, error)

	effects      string
	effectsQuery string
	keyFile      string
	signers      string
}

// newDoctorCmd builds doctor; runF, when not nil, runs instead of
// runDoctor.
func newDoctorCmd(f *Factory, runF func(context.Context, *doctorOptions) error) *cobra.Command {
	o := &doctorOptions{}
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check what a redrive needs: source, DLQ, origins, effects store, approval key, config",
		Long: `Check, one line each, what a redrive will need, and say how to fix each
failure: the config and profile parse; the source answers and the DLQ
exists, and where the backend can tell, the DLQ's shape (a queue type, a
delivery limit that dlqctl's own reads count against); the origins exist, with their consumer groups on Redis (Redis, Kafka, SQS); the
consumer a NATS advisory stream captures exists and no delivered messages wait
for its next pull (those that reached max deliveries get no advisory before); the
effects store answers and has the inbox table (with --effects); the
allowed_signers file that SSH-signed approvals verify against parses, and
which principals it lists; the HMAC approval key, when approvals are not
signatures only, is set, at least 32 bytes and not a placeholder. Exit 0 only
when every check passes, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Report, o.Policy = f.IO, f.reportOptions(), f.config.Policy
			o.ConfigPath, o.SourceForm = f.config.path, sourceForm(f.Backends, f.source)
			o.Keys = approvalSettingsFor(f).trustKeys(keyFlags{keyFile: o.keyFile, allowedSigners: o.signers})
			o.Rules = func() error { _, err := f.classifier(); return err }
			o.OpenSource, o.OpenProbe = f.openSource, effectsFor(f.Deps).OpenEffects
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runDoctor(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.effects, "effects", "", "effects store to check, as for redrive plan (e.g. sqlite:inbox.db)")
	c.Flags().StringVar(&o.effectsQuery, "effects-query", "", "the custom PostgreSQL query a plan would use")
	c.Flags().StringVar(&o.keyFile, "key-file", "", "file with the HMAC approval key (default: DLQCTL_APPROVAL_KEY)")
	c.Flags().StringVar(&o.signers, "allowed-signers", "", "allowed_signers file to check (default: DLQCTL_ALLOWED_SIGNERS, then policy.allowed_signers)")
	return c
}

// Check is one line of dlqctl.doctor/v1.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Warn marks a passing check worth a person's look: it does not fail
	// doctor.
	Warn   bool   `json:"warn,omitempty"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// DoctorDoc is dlqctl.doctor/v1.
type DoctorDoc struct {
	Schema string  `json:"schema"`
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

func runDoctor(ctx context.Context, o *doctorOptions) error {
	doc := DoctorDoc{Schema: "dlqctl.doctor/v1", Checks: []Check{}}
	add := func(c Check) { doc.Checks = append(doc.Checks, c) }

	// The config parsed, or the command would not have started.
	cfgDetail := "no config file: flags and environment only"
	if o.ConfigPath != "" {
		cfgDetail = o.ConfigPath + " parses"
	}
	if err := o.Rules(); err != nil {
		add(Check{Name: "config", Detail: err.Error(), Fix: "correct the category rules named in the message"})
	} else {
		add(Check{Name: "config", OK: true, Detail: cfgDetail})
	}

	doc.Checks = append(doc.Checks, sourceChecks(ctx, o)...)
	if o.effects != "" {
		add(effectsCheck(ctx, o))
	}

	for _, c := range approvalChecks(o.Keys, o.Policy) {
		add(c)
	}

	doc.OK = true
	failed := 0
	for _, c := range doc.Checks {
		if !c.OK {
			doc.OK = false
			failed++
		}
	}
	var err error
	if done, jerr := emitJSON(o.IO.Out, o.Report.Format, doc); done {
		err = jerr
	} else {
		err = writeDoctor(o.IO.Out, doc, o.Report)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return withCode(ExitError, fmt.Errorf("doctor: %s failed", plural(failed, "check")))
	}
	return nil
}

// sourceChecks open the source: it answers, its DLQ exists, the origins
// its entries name exist, and whatever the backend checks of its own.
func sourceChecks(ctx context.Context, o *doctorOptions) []Check {
	src, err := o.OpenSource(ctx)
	if err != nil {
		return []Check{{Name: "source", Detail: err.Error(), Fix: sourceFix(err, o.SourceForm)}}
	}
	defer src.Close()
	n, err := src.Len(ctx)
	if err != nil {
		return []Check{{Name: "source", Detail: fmt.Sprintf("%s: %v", src, err), Fix: "check the address, credentials and that the server runs"}}
	}
	checks := []Check{{Name: "source", OK: true, Detail: fmt.Sprintf("%s answers", src)}}
	if nt, ok := src.(backend.Noticer); ok && nt.Notice() != "" {
		checks = append(checks, Check{Name: "dlq", Detail: nt.Notice(), Fix: "check the DLQ name in --source (" + o.SourceForm + ")"})
	} else {
		checks = append(checks, Check{Name: "dlq", OK: true, Detail: fmt.Sprintf("exists, %s", entries(int(n)))})
	}
	checks = append(checks, originChecks(ctx, src)...)
	if dc, ok := src.(backend.DoctorChecker); ok {
		for _, c := range dc.DoctorChecks(ctx) {
			checks = append(checks, Check{Name: c.Name, OK: c.OK, Detail: c.Detail, Fix: c.Fix})
		}
	}
	return checks
}

// effectsCheck looks up one event no consumer has in the effects store:
// it must answer, and answer "unknown" rather than fail on a missing
// table.
func effectsCheck(ctx context.Context, o *doctorOptions) Check {
	probe, err := o.OpenProbe(ctx, o.effects, o.effectsQuery)
	if err == nil {
		_, err = probe.Records(ctx, []string{"dlqctl-doctor-probe"})
		probe.Close()
	}
	if err != nil {
		return Check{Name: "effects", Detail: fmt.Sprintf("%s: %v", backend.RedactURL(o.effects), err),
			Fix: "start the store, or create the consumer's inbox(event_id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, attempts INTEGER, effects INTEGER) table (see docs/consumer-contract.md)"}
	}
	return Check{Name: "effects", OK: true, Detail: backend.RedactURL(o.effects) + " answers and has its inbox table"}
}

func writeDoctor(w io.Writer, doc DoctorDoc, ro report.Options) error {
	if ro.Format == report.FormatMarkdown || !ro.TTY {
		t := report.Table{Columns: []report.Column{{Name: "check", Kind: report.Key}, {Name: "result", Kind: report.Key, Tone: report.VerdictTone},
			{Name: "detail"}, {Name: "fix"}}}
		for _, c := range doc.Checks {
			t.Rows = append(t.Rows, []any{c.Name, checkResult(c), c.Detail, c.Fix})
		}
		return report.WriteTable(w, t, ro)
	}
	for _, c := range doc.Checks {
		tone, mark := report.ToneGood, "✓"
		switch {
		case !c.OK:
			tone, mark = report.ToneBad, "✗"
		case c.Warn:
			tone, mark = report.ToneWarn, "!"
		}
		line := fmt.Sprintf("%s %s: %s", mark, c.Name, c.Detail)
		if err := report.WriteLine(w, tone, line, ro); err != nil {
			return err
		}
		if c.Fix != "" {
			fmt.Fprintf(w, "    fix: %s\n", report.Truncate(c.Fix, 0))
		}
	}
	return nil
}

// checkResult is a check's result column: pass, warn (passes, worth a
// look) or fail.
func checkResult(c Check) string {
	switch {
	case !c.OK:
		return "fail"
	case c.Warn:
		return "warn"
	}
	return "pass"
}

// sourceForm is how a source is written: the usage of the backend that
// serves source, else a pointer to every backend's.
func sourceForm(backends *backend.Registry, source string) string {
	if reg, err := backends.Lookup(source); err == nil {
		return reg.Usage
	}
	return "dlqctl docs backends lists the form of each backend"
}

func sourceFix(err error, form string) string {
	var ce *backend.ConfigError
	if errors.As(err, &ce) {
		return "correct --source (" + form + "), DLQCTL_SOURCE or the profile"
	}
	return "check that the server runs and answers at that address, and the credentials"
}

// originChecks looks at where the DLQ's entries came from, on backends
// that can tell whether a destination exists and is read: a redrive
// would otherwise publish where nobody reads.
func originChecks(ctx context.Context, src backend.Source) []Check {
	oc, ok := src.(backend.OriginChecker)
	if !ok {
		return nil
	}
	groups := map[string]map[string]bool{} // origin → groups named by envelopes
	err := src.Scan(ctx, "", func(e envelope.Envelope) error {
		if e.Origin.Topic == "" {
			return nil
		}
		if groups[e.Origin.Topic] == nil {
			groups[e.Origin.Topic] = map[string]bool{}
		}
		if e.Origin.Subscription != "" {
			groups[e.Origin.Topic][e.Origin.Subscription] = true
		}
		return nil
	})
	if err != nil {
		return []Check{{Name: "origins", Detail: err.Error(), Fix: "check the server"}}
	}
	var out []Check
	for _, origin := range sortedKeys(groups) {
		st := oc.CheckOrigin(ctx, origin, sortedKeys(groups[origin]))
		out = append(out, Check{Name: "origin " + origin, OK: st.OK, Detail: st.Detail, Fix: st.Fix})
	}
	return out
}

// approvalChecks are doctor's lines on approvals: the allowed_signers file
// (when one is in effect), and the HMAC key unless approvals are signatures
// only or signed approvals are set up and no HMAC key is.
func approvalChecks(keys trust.Keys, p trust.Policy) []Check {
	var checks []Check
	signers, serr := keys.Signers(p)
	switch {
	case serr != nil:
		checks = append(checks, Check{Name: "allowed signers", Detail: serr.Error(),
			Fix: "fix the file: one line per key, PRINCIPALS [OPTIONS] KEYTYPE KEY (the ssh-keygen ALLOWED SIGNERS format)"})
	case signers != nil && len(signers.Signers) == 0:
		checks = append(checks, Check{Name: "allowed signers", Detail: signers.Path + " lists no key",
			Fix: "add one line per approver: PRINCIPAL KEYTYPE KEY (their ~/.ssh/id_ed25519.pub)"})
	case signers != nil:
		detail := fmt.Sprintf("%s: %s, principals %s", signers.Path, plural(len(signers.Signers), "key"), strings.Join(signers.Principals(), ", "))
		if n := len(signers.CertAuthority); n > 0 {
			detail += fmt.Sprintf("; %s marked cert-authority let no one approve (certificates are not accepted)", plural(n, "line"))
		}
		checks = append(checks, Check{Name: "allowed signers", OK: true, Detail: detail})
	}
	if w := hmacBesideSigners(signers, p); w != nil {
		checks = append(checks, *w)
	}
	key, kerr := keys.HMACKey()
	switch {
	case p.SignaturesOnly:
		checks = append(checks, Check{Name: "approval key", OK: true, Detail: "not used: policy.signatures_only accepts SSH signatures only"})
		return checks
	case signers != nil && kerr == nil && len(key) == 0:
		checks = append(checks, Check{Name: "approval key", OK: true, Detail: "not set: approvals are SSH signatures checked against " + signers.Path})
		return checks
	}
	if kerr == nil {
		kerr = trust.CheckKey(key)
	}
	if kerr != nil {
		checks = append(checks, Check{Name: "approval key", Detail: kerr.Error(),
			Fix: "sign approvals with SSH keys (approve --sign-with, allowed_signers), or export DLQCTL_APPROVAL_KEY=$(openssl rand -hex 32), shared by approvers and appliers (or --key-file)"})
	} else {
		n, hex := approval.KeyBytes(key)
		detail := fmt.Sprintf("set, %d bytes", n)
		if hex {
			detail = fmt.Sprintf("set, %d bytes (%d hex digits)", n, len(key))
		}
		checks = append(checks, Check{Name: "approval key", OK: true, Detail: detail})
	}
	return checks
}

// hmacBesideSigners is doctor's warning when a policy names signers but
// still takes HMAC approvals: whoever holds the HMAC key, as the applying
// host does, can make one. Nil when there is nothing to warn of.
func hmacBesideSigners(signers *approval.AllowedSigners, p trust.Policy) *Check {
	if signers == nil || p.SignaturesOnly {
		return nil
	}
	detail := "policy.signatures_only is off beside allowed_signers: an HMAC approval alone lets a run go, and whoever holds the HMAC key (the applying host does) can make one"
	if p.ApprovalsRequired > 1 {
		detail = fmt.Sprintf("policy.signatures_only is off beside allowed_signers: HMAC approvals are shown but never counted toward policy.approvals_required (%d)", p.ApprovalsRequired)
	}
	return &Check{Name: "hmac approvals", OK: true, Warn: true, Detail: detail,
		Fix: "set policy.signatures_only: true, so that only approvals the applying host cannot make are taken"}
}
