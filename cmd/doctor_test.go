package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/report"
	"github.com/dlqctl/dlqctl/trust"
)

// TestRunDoctor calls doctor's run function with options of its own: a
// source that cannot be opened, no effects store, and each way approvals
// may be set up. No command line, no Factory.
func TestRunDoctor(t *testing.T) {
	const goodKey = "3f9a1c0b7e6d5a4f8b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a"
	refused := func(context.Context) (backend.Source, error) {
		return nil, backend.Configf(`source "nope": unknown scheme "nope"`)
	}
	noProbe := func(context.Context, string, string) (effects.Probe, error) {
		t.Error("doctor opened an effects store without --effects")
		return nil, errors.New("not here")
	}
	for _, tc := range []struct {
		name   string
		policy trust.Policy
		keys   trust.Keys
		rules  error
		want   map[string]string // check name → "pass" or "fail: detail part"
	}{
		{name: "nothing set up", want: map[string]string{
			"config": "pass", "source": `fail: unknown scheme "nope"`, "approval key": "fail: no approval key"}},
		{name: "a good key", keys: trust.Keys{EnvKey: goodKey}, want: map[string]string{
			"approval key": "pass: set, 32 bytes (64 hex digits)"}},
		{name: "openssl rand -hex 16", keys: trust.Keys{EnvKey: goodKey[:32]}, want: map[string]string{
			"approval key": "fail: approval key too short: its 32 hex digits are 16 bytes, at least 32 are needed"}},
		{name: "32 characters of text", keys: trust.Keys{EnvKey: "k-one-0123456789abcdef0123456789"}, want: map[string]string{
			"approval key": "pass: set, 32 bytes"}},
		{name: "a short key", keys: trust.Keys{EnvKey: "short"}, want: map[string]string{
			"approval key": "fail: approval key too short"}},
		{name: "signatures only", policy: trust.Policy{SignaturesOnly: true}, want: map[string]string{
			"approval key": "pass: not used"}},
		{name: "broken rules", rules: errors.New("rule 2: bad pattern"), want: map[string]string{
			"config": "fail: rule 2: bad pattern"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			io, _, out, _ := TestIO()
			err := runDoctor(context.Background(), &doctorOptions{
				IO: io, Report: report.Options{Format: report.FormatJSON},
				Policy: tc.policy, Keys: tc.keys, SourceForm: "nope://HOST?dlq=NAME",
				Rules:      func() error { return tc.rules },
				OpenSource: refused, OpenProbe: noProbe,
			})
			if code := exitCode(err); code != ExitError {
				t.Errorf("exit %d (%v), want %d: a check fails", code, err, ExitError)
			}
			var doc DoctorDoc
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if doc.Schema != "dlqctl.doctor/v1" || doc.OK {
				t.Errorf("schema %q, ok %v", doc.Schema, doc.OK)
			}
			got := map[string]Check{}
			for _, c := range doc.Checks {
				got[c.Name] = c
			}
			for name, want := range tc.want {
				c, ok := got[name]
				verdict, detail, _ := strings.Cut(want, ": ")
				switch {
				case !ok:
					t.Errorf("no %q check in %+v", name, doc.Checks)
				case c.OK != (verdict == "pass") || !strings.Contains(c.Detail, detail):
					t.Errorf("%s: ok %v, %q; want %s", name, c.OK, c.Detail, want)
				case !c.OK && c.Fix == "":
					t.Errorf("%s fails without a fix", name)
				}
			}
			if fix := got["source"].Fix; !strings.Contains(fix, "correct --source (nope://HOST?dlq=NAME)") {
				t.Errorf("source fix %q: want it to show how the source's backend is written", fix)
			}
		})
	}
}

// TestDoctorOptionsFromTheCommandLine: flags, environment and settings
// reach doctor's options; the run function is not called.
func TestDoctorOptionsFromTheCommandLine(t *testing.T) {
	io, _, out, _ := TestIO()
	env := map[string]string{"DLQCTL_APPROVAL_KEY": "from-env", "DLQCTL_ALLOWED_SIGNERS": "env_signers"}
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: func() time.Time { return testNow }, Getenv: func(k string) string { return env[k] }}}
	var got *doctorOptions
	execSub(t, f, newDoctorCmd(f, func(_ context.Context, o *doctorOptions) error { got = o; return nil }),
		"doctor", "-o", "ndjson", "--key-file", "k.txt", "--effects", "sqlite:inbox.db", "--effects-query", "q")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.Keys.KeyFile != "k.txt" || got.Keys.EnvKey != "from-env" || got.Keys.SignersPath(got.Policy) != "env_signers":
		t.Errorf("keys %+v", got.Keys)
	case got.effects != "sqlite:inbox.db" || got.effectsQuery != "q":
		t.Errorf("effects %q, query %q", got.effects, got.effectsQuery)
	case got.Report.Format != report.FormatNDJSON || got.IO != io || got.ConfigPath != "":
		t.Errorf("settings: format %q, config %q", got.Report.Format, got.ConfigPath)
	case !strings.Contains(got.SourceForm, "dlqctl docs backends"):
		t.Errorf("source form %q without a source", got.SourceForm)
	case got.OpenSource == nil || got.OpenProbe == nil || got.Rules == nil:
		t.Error("a dependency is missing")
	}
	if out.Len() != 0 {
		t.Errorf("the run function ran: %q", out)
	}
}
