package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
)

// optionsFactory is a factory with a pinned clock and environment for
// tests that build one command with a runF capturing its options.
func optionsFactory(env map[string]string) (*Factory, *IOStreams) {
	io, _, _, _ := TestIO()
	return &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: func() time.Time { return testNow }, Getenv: func(k string) string { return env[k] }}}, io
}

// TestListOptionsFromTheCommandLine: list's flags and settings reach its
// options; the run function is not called.
func TestListOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *listOptions
	execSub(t, f, newListCmd(f, func(_ context.Context, o *listOptions) error { got = o; return nil }),
		"list", "-o", "ndjson", "--category", "transient,schema", "--limit", "7", "--after", "1700000000000-3", "--overdue")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case !slices.Equal(got.sel.categories, []string{"transient", "schema"}) || got.sel.limit != 7 || !got.sel.overdue:
		t.Errorf("selectors %+v", got.sel)
	case got.after != "1700000000000-3":
		t.Errorf("after %q", got.after)
	case got.Report.Format != report.FormatNDJSON || got.IO != io || !got.Report.Now.Equal(testNow):
		t.Errorf("settings: format %q, now %v", got.Report.Format, got.Report.Now)
	case got.OpenSession == nil:
		t.Error("OpenSession is missing")
	}
	// The default page is 50 entries.
	execSub(t, f, newListCmd(f, func(_ context.Context, o *listOptions) error { got = o; return nil }), "list")
	if got.sel.limit != 50 {
		t.Errorf("default limit %d, want 50", got.sel.limit)
	}
}

// TestShowOptionsFromTheCommandLine: show's argument, flags and settings
// reach its options.
func TestShowOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *showOptions
	execSub(t, f, newShowCmd(f, func(_ context.Context, o *showOptions) error { got = o; return nil }),
		"show", "evt-7ab4c1b91885", "-o", "markdown", "--redact", "orderId,customer.vat", "--reveal")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.Ref != "evt-7ab4c1b91885":
		t.Errorf("ref %q", got.Ref)
	case !got.reveal || !slices.Equal(got.redact, []string{"orderId", "customer.vat"}):
		t.Errorf("reveal %v, redact %v", got.reveal, got.redact)
	case got.Report.Format != report.FormatMarkdown || got.IO != io:
		t.Errorf("settings: format %q", got.Report.Format)
	case got.OpenSession == nil:
		t.Error("OpenSession is missing")
	}
}

// TestStatsOptionsFromTheCommandLine: stats's selectors, --allow-missing
// and --watch settings reach its options.
func TestStatsOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *statsOptions
	execSub(t, f, newStatsCmd(f, func(_ context.Context, o *statsOptions) error { got = o; return nil }),
		"stats", "-o", "json", "--origin", "orders", "--allow-missing", "--watch", "--interval", "3s", "--count", "2")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case !slices.Equal(got.sel.origins, []string{"orders"}) || got.sel.limit != 0:
		t.Errorf("selectors %+v", got.sel)
	case !got.allowMissing || !f.allowMissing || !f.refusesMissing:
		t.Errorf("allow-missing: options %v, factory %v/%v", got.allowMissing, f.allowMissing, f.refusesMissing)
	case !got.watch.watch || got.watch.interval != 3*time.Second || got.watch.count != 2:
		t.Errorf("watch %+v", got.watch)
	case got.Report.Format != report.FormatJSON || got.IO != io || got.OpenSession == nil:
		t.Errorf("settings: format %q", got.Report.Format)
	}
}

// TestCheckOptionsFromTheCommandLine: check's thresholds and
// --allow-missing reach its options; without --max-total it is -1 (none).
func TestCheckOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *checkOptions
	execSub(t, f, newCheckCmd(f, func(_ context.Context, o *checkOptions) error { got = o; return nil }),
		"check", "-o", "openmetrics", "--max-age", "1h", "--max-category", "schema=0", "--max-category", "unknown=3", "--fail-on-conflict", "--allow-missing")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.maxTotal != -1 || got.maxAge != "1h" || !slices.Equal(got.maxCategory, []string{"schema=0", "unknown=3"}) || !got.failOnConflict:
		t.Errorf("thresholds: total %d, age %q, categories %v, conflict %v", got.maxTotal, got.maxAge, got.maxCategory, got.failOnConflict)
	case !got.allowMissing || !f.allowMissing || !f.refusesMissing:
		t.Errorf("allow-missing: options %v, factory %v/%v", got.allowMissing, f.allowMissing, f.refusesMissing)
	case got.Report.Format != report.FormatOpenMetrics || got.IO != io || got.OpenSession == nil:
		t.Errorf("settings: format %q", got.Report.Format)
	}
	execSub(t, f, newCheckCmd(f, func(_ context.Context, o *checkOptions) error { got = o; return nil }), "check", "--max-total", "0")
	if got.maxTotal != 0 || got.allowMissing {
		t.Errorf("--max-total 0: total %d, allow-missing %v", got.maxTotal, got.allowMissing)
	}
}

// TestCategorizeOptionsFromTheCommandLine: --explain reaches the options;
// TestCheckSourceThresholds: --max-source-gone and --min-source-retention
// reach check's options, each is breached past its limit and not at it,
// and a source without a time limit breaches no --min-source-retention.
func TestCheckSourceThresholds(t *testing.T) {
	f, _ := optionsFactory(nil)
	var got *checkOptions
	execSub(t, f, newCheckCmd(f, func(_ context.Context, o *checkOptions) error { got = o; return nil }),
		"check", "--max-source-gone", "2", "--min-source-retention", "1d")
	if got == nil || got.maxSourceGone != 2 || got.minSourceRetention != "1d" {
		t.Fatalf("options: %+v", got)
	}
	if _, err := parseSourceThresholds(&checkOptions{maxSourceGone: -2}); err == nil {
		t.Errorf("--max-source-gone -2 was taken")
	}
	hour := int64(3600)
	doc := CheckDoc{SourceGone: 2, SourceRetention: []SourceRetentionDoc{{Source: "a/0"}, {Source: "b/0", LeftSeconds: &hour}}}
	if v := sourceViolations(2, time.Hour, doc); len(v) != 0 {
		t.Errorf("at the limits: %+v", v)
	}
	v := sourceViolations(1, 2*time.Hour, doc)
	if len(v) != 2 || v[0] != (Violation{"max-source-gone", 1, 2}) || v[1] != (Violation{"min-source-retention", 7200, 3600}) {
		t.Errorf("past both: %+v", v)
	}
	doc.SourceRetention = doc.SourceRetention[:1]
	if v := sourceViolations(-1, 24*time.Hour, doc); len(v) != 0 {
		t.Errorf("no time limit: %+v", v)
	}
}

// --suggest-rules implies --discover; the flag checks run before runF.
func TestCategorizeOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *categorizeOptions
	capture := func(_ context.Context, o *categorizeOptions) error { got = o; return nil }
	execSub(t, f, newCategorizeCmd(f, capture), "categorize", "--explain", "-o", "json")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case !got.explain || got.discover || got.Report.Format != report.FormatJSON || got.IO != io || got.OpenSession == nil:
		t.Errorf("explain %v, discover %v, format %q", got.explain, got.discover, got.Report.Format)
	}
	got = nil
	execSub(t, f, newCategorizeCmd(f, capture), "categorize", "--suggest-rules", "rules.yaml", "--category", "transient")
	if got == nil || !got.discover || got.suggestRules != "rules.yaml" || got.category != "transient" || got.RuleSpecs == nil {
		t.Errorf("suggest-rules: %+v", got)
	}
	got = nil
	root := newCategorizeCmd(f, capture)
	root.SetArgs([]string{"--all"})
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	if err := root.Execute(); err == nil || got != nil {
		t.Errorf("--all without --discover: err %v, runF called %v", err, got != nil)
	}
}

// TestSampleOptionsFromTheCommandLine: sample's flags reach its options;
// without --seed the seed comes from the clock.
func TestSampleOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *sampleOptions
	capture := func(_ context.Context, o *sampleOptions) error { got = o; return nil }
	execSub(t, f, newSampleCmd(f, capture), "sample", "--per-category", "5", "--seed", "42", "--redact", "iban", "--category", "schema")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.perCategory != 5 || got.seed != 42 || !slices.Equal(got.redact, []string{"iban"}) || !slices.Equal(got.sel.categories, []string{"schema"}):
		t.Errorf("options %+v", got)
	case got.IO != io || got.OpenSession == nil || got.Report.Format != report.FormatTable:
		t.Errorf("settings: format %q", got.Report.Format)
	}
	execSub(t, f, newSampleCmd(f, capture), "sample")
	if got.seed != uint64(testNow.UnixNano()) || got.perCategory != 3 {
		t.Errorf("defaults: seed %d, per category %d", got.seed, got.perCategory)
	}
}

// TestExportOptionsFromTheCommandLine: export's selectors and --out reach
// its options.
func TestExportOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *exportOptions
	execSub(t, f, newExportCmd(f, func(_ context.Context, o *exportOptions) error { got = o; return nil }),
		"export", "--out", "backup.ndjson", "--event-id", "E1", "--event-id", "E2,x", "--older-than", "2h")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.out != "backup.ndjson" || !slices.Equal(got.sel.eventIDs, []string{"E1", "E2,x"}) || got.sel.olderThan != "2h" || got.sel.limit != 0:
		t.Errorf("options: out %q, selectors %+v", got.out, got.sel)
	case got.IO != io || got.OpenSession == nil:
		t.Error("a dependency is missing")
	}
}

// TestImportOptionsFromTheCommandLine: import's file argument and flags
// reach its options, with the source operations it calls.
func TestImportOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *importOptions
	capture := func(_ context.Context, o *importOptions) error { got = o; return nil }
	execSub(t, f, newImportCmd(f, capture), "import", "incident.ndjson", "--init", "--skip-existing")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.file != "incident.ndjson" || !got.init || !got.skipExisting:
		t.Errorf("options: file %q, init %v, skip %v", got.file, got.init, got.skipExisting)
	case got.IO != io || got.InitDLQ == nil || got.OpenSource == nil || got.RefuseWhileLeased == nil:
		t.Error("a dependency is missing")
	}
	execSub(t, f, newImportCmd(f, capture), "import")
	if got.file != "" || got.init || got.skipExisting {
		t.Errorf("defaults: %+v", got)
	}
}

// TestPendingOptionsFromTheCommandLine: pending's flags and the source in
// effect (here from the environment) reach its options.
func TestPendingOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(map[string]string{"DLQCTL_SOURCE": "redis://127.0.0.1:6379/0"})
	var got *pendingOptions
	execSub(t, f, newPendingCmd(f, func(_ context.Context, o *pendingOptions) error { got = o; return nil }),
		"pending", "--stream", "orders", "--group", "workers", "--min-idle", "5m")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.stream != "orders" || got.group != "workers" || got.minIdle != "5m" || got.limit != 10000:
		t.Errorf("options %+v", got)
	case got.Source != "redis://127.0.0.1:6379/0" || got.IO != io || got.OpenSource == nil:
		t.Errorf("source %q", got.Source)
	}
}

// TestPendingRefusesANonRedisSource: the refusal comes before any source
// is opened.
func TestPendingRefusesANonRedisSource(t *testing.T) {
	io, _, _, _ := TestIO()
	opened := false
	err := runPending(context.Background(), &pendingOptions{IO: io, Source: "dir:/tmp/q", stream: "s", group: "g", limit: 1,
		OpenSource: func(context.Context, string) (backend.Source, error) { opened = true; return nil, errors.New("opened") },
		Lookup:     testBackends().Lookup})
	if err == nil || !strings.Contains(err.Error(), "reads through consumer groups") || !strings.Contains(err.Error(), "a directory queue has none") || opened {
		t.Errorf("err %v, opened %v", err, opened)
	}
}

// TestQuarantineOptionsFromTheCommandLine: quarantine's flags reach its
// options, and the clock of the invocation stamps the envelopes.
func TestQuarantineOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *quarantineOptions
	execSub(t, f, newQuarantineCmd(f, func(_ context.Context, o *quarantineOptions) error { got = o; return nil }),
		"quarantine", "--stream", "orders", "--group", "workers", "--min-idle", "30m", "--min-deliveries", "5",
		"--reason", "stuck", "--category", "code-defect", "--dry-run", "--limit", "9")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.stream != "orders" || got.group != "workers" || got.minIdle != "30m" || got.minDeliveries != 5 ||
		got.reason != "stuck" || got.category != "code-defect" || !got.dryRun || got.limit != 9:
		t.Errorf("options %+v", got)
	case got.IO != io || got.OpenSession == nil || !got.Report.Now.Equal(testNow):
		t.Errorf("settings: now %v", got.Report.Now)
	}
}

// TestReconcileOptionsFromTheCommandLine: reconcile's flags and the source
// in effect reach its options with what it calls out to.
func TestReconcileOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *reconcileOptions
	capture := func(_ context.Context, o *reconcileOptions) error { got = o; return nil }
	execSub(t, f, newReconcileCmd(f, capture), "reconcile", "--journal", "p.journal", "--plan", "p.plan.json",
		"--effects", "sqlite:inbox.db", "--effects-query", "q", "--events")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.journal != "p.journal" || got.plan != "p.plan.json" || got.effects != "sqlite:inbox.db" || got.query != "q" || !got.events:
		t.Errorf("options %+v", got)
	case got.Source != "" || got.IO != io || got.Now == nil || got.OpenSession == nil || got.OpenProbe == nil || got.LoadRunPlan == nil:
		t.Errorf("settings: source %q, or a dependency is missing", got.Source)
	}
	execSub(t, f, newReconcileCmd(f, capture), "reconcile", "--event-id", "E1", "--event-id", "E2")
	if !slices.Equal(got.eventIDs, []string{"E1", "E2"}) {
		t.Errorf("event ids %v", got.eventIDs)
	}
}

// TestReconcileWithoutEffectsOrSource: with neither, reconcile says what
// to give before it opens anything.
func TestReconcileWithoutEffectsOrSource(t *testing.T) {
	io, _, _, _ := TestIO()
	err := runReconcile(context.Background(), &reconcileOptions{IO: io, eventIDs: []string{"E1"}})
	if err == nil || !strings.Contains(err.Error(), "no effects URL and no source") {
		t.Errorf("err %v", err)
	}
}

// TestStatusOptionsFromTheCommandLine: status's journal, kind and --plan
// reach its options with what it calls out to.
func TestStatusOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *statusOptions
	execSub(t, f, newStatusCmd(f, "resolve", func(_ context.Context, o *statusOptions) error { got = o; return nil }),
		"status", "r.journal", "--plan", "r.plan.json", "-o", "json")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.Kind != "resolve" || got.Journal != "r.journal" || got.planPath != "r.plan.json":
		t.Errorf("options %+v", got)
	case got.Report.Format != report.FormatJSON || got.IO != io || got.Now == nil || got.LoadRunPlan == nil || got.ResumeCommand == nil:
		t.Errorf("settings: format %q, or a dependency is missing", got.Report.Format)
	}
}

// TestPlanOptionsFromTheCommandLine: the plan flags of each kind reach the
// options; resolve takes no destination, rate or effects.
func TestPlanOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *planOptions
	capture := func(_ context.Context, o *planOptions) error { got = o; return nil }
	execSub(t, f, newPlanCmd(f, "redrive", capture), "plan", "--out", "p.plan.json", "--reason", "fixed", "--to", "orders",
		"--rate", "0", "--ramp", "5,20", "--effects", "sqlite:inbox.db", "--settle", "2s", "--max", "100", "--category", "transient")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.flags.kind != "redrive" || got.flags.out != "p.plan.json" || got.flags.reason != "fixed" || got.flags.to != "orders" ||
		got.flags.rate != 0 || got.flags.ramp != "5,20" || got.flags.effects != "sqlite:inbox.db" || got.flags.settle != 2*time.Second ||
		got.flags.max != 100 || !slices.Equal(got.flags.sel.categories, []string{"transient"}):
		t.Errorf("flags %+v", got.flags)
	case got.IO != io || got.OpenSession == nil || got.MakePlan == nil || got.PrintPlan == nil:
		t.Error("a dependency is missing")
	}
	execSub(t, f, newPlanCmd(f, "resolve", capture), "plan", "--out", "r.plan.json", "--reason", "obsolete")
	if got.flags.kind != "resolve" || got.flags.rate != 0 || got.flags.ramp != "10,50,200" {
		t.Errorf("resolve flags %+v", got.flags)
	}
}

// TestPlanNeedsOut: without --out nothing is opened.
func TestPlanNeedsOut(t *testing.T) {
	io, _, _, _ := TestIO()
	opened := false
	err := runPlan(context.Background(), &planOptions{IO: io, flags: planFlags{kind: "redrive", reason: "x"},
		OpenSession: func(context.Context) (*session, error) { opened = true; return nil, errors.New("opened") }})
	if err == nil || !strings.Contains(err.Error(), "--out is required") || opened {
		t.Errorf("err %v, opened %v", err, opened)
	}
}

// TestApplyOptionsFromTheCommandLine: apply's plan argument and flags
// reach its options; only redrive takes --effects.
func TestApplyOptionsFromTheCommandLine(t *testing.T) {
	f, _ := optionsFactory(nil)
	var got *applyOptions
	capture := func(_ context.Context, o *applyOptions) error { got = o; return nil }
	execSub(t, f, newApplyCmd(f, "redrive", capture), "apply", "p.plan.json", "--journal", "j", "--skip-missing",
		"--key-file", "k", "--allowed-signers", "s", "--keys-dir", "d", "--require-distinct-approver", "--effects", "postgres://u:pw@h/db")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.Kind != "redrive" || got.Plan != "p.plan.json" || got.journal != "j" || !got.skipMissing || !got.distinct || got.effects != "postgres://u:pw@h/db":
		t.Errorf("options %+v", got)
	case got.keys != (keyFlags{keyFile: "k", keysDir: "d", allowedSigners: "s"}):
		t.Errorf("keys %+v", got.keys)
	case got.ReadPlan == nil || got.PlanApprovals == nil || got.ApprovalPolicy == nil || !got.Runner.complete():
		t.Error("a dependency is missing")
	}
	if newApplyCmd(f, "resolve", capture).Flags().Lookup("effects") != nil {
		t.Error("resolve apply takes --effects")
	}
}

// TestApplyRefusesAnUnapprovedPlan: a plan without a valid approval is
// refused (exit 5) and never run.
func TestApplyRefusesAnUnapprovedPlan(t *testing.T) {
	ran := false
	o := &applyOptions{Kind: "redrive", Plan: "p.plan.json",
		ReadPlan:       func(string, string) (*redrive.Plan, error) { return onePlan("redrive", ""), nil },
		PlanApprovals:  func(*redrive.Plan, string) error { return nil },
		ApprovalPolicy: func(keyFlags, bool) (redrive.ApprovalPolicy, error) { return redrive.ApprovalPolicy{}, nil },
		Runner:         planRunner{Runner: redrive.Runner{Sources: openNothing{&ran}, Now: time.Now}},
	}
	err := runApply(context.Background(), o)
	if err == nil || exitCode(err) != ExitApproval || !strings.Contains(err.Error(), "p.plan.json: not approved") || ran {
		t.Errorf("err %v (exit %d), ran %v", err, exitCode(err), ran)
	}
}

// TestApproveOptionsFromTheCommandLine: approve's plan argument, flags and
// the policy in effect reach its options.
func TestApproveOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(map[string]string{"SSH_AUTH_SOCK": "/run/agent.sock"})
	var got *approveOptions
	execSub(t, f, newApproveCmd(f, "resolve", func(_ context.Context, o *approveOptions) error { got = o; return nil }),
		"approve", "p.plan.json", "--by", "bob", "--ttl", "30m", "--sign-with", "id.pub", "--detach", "--again",
		"--require-distinct-approver", "--key-file", "k")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.Kind != "resolve" || got.Plan != "p.plan.json" || got.by != "bob" || got.ttl != 30*time.Minute || got.signWith != "id.pub" ||
		!got.detach || !got.again || !got.distinct || got.keys.keyFile != "k":
		t.Errorf("options %+v", got)
	case got.IO != io || got.SSHAuthSock != "/run/agent.sock" || got.Config != "(no config file)" || !got.Now().Equal(testNow):
		t.Errorf("settings: sock %q, config %q", got.SSHAuthSock, got.Config)
	case got.ReadPlan == nil || got.PlanApprovals == nil || got.Identity == nil || got.SigningKey == nil ||
		got.AllowedSigners == nil || got.Review == nil || got.NextStep == nil:
		t.Error("a dependency is missing")
	}
}

// onePlan is a plan of kind with one entry, planned by planner.
func onePlan(kind, planner string) *redrive.Plan {
	return &redrive.Plan{Kind: kind, PlannedBy: planner, Entries: redrive.NewEntries(redrive.Entry{Seq: 1, ID: "1-0", EventID: "E1"})}
}

// approveWith is approve's options over a plan planned by alice, with an
// HMAC key and a review that passes.
func approveWith(by string) *approveOptions {
	io, _, _, _ := TestIO()
	return &approveOptions{IO: io, Kind: "redrive", Plan: "p.plan.json", Config: "config c.yaml", Now: func() time.Time { return testNow },
		ttl: time.Hour, by: by,
		ReadPlan: func(string, string) (*redrive.Plan, error) {
			return onePlan("redrive", "alice"), nil
		},
		PlanApprovals: func(*redrive.Plan, string) error { return nil },
		Identity:      func(flag string) string { return flag },
		SigningKey: func(keyFlags, string) ([]byte, error) {
			return []byte("c2f1e0a9b8d7c6b5a4f3e2d1c0b9a8f7c2f1e0a9b8d7c6b5a4f3e2d1c0b9a8f7"), nil
		},
		Review:   func(*redrive.Plan, string, string, keyFlags, func(redrive.Approval) bool, bool) error { return nil },
		NextStep: func(context.Context, *redrive.Plan, string, keyFlags) string { return "next" },
	}
}

// TestApproveRefusals: the run function refuses, before writing anything,
// an HMAC approval under policy.signatures_only, the planner under the
// distinct approver policy, and a TTL over the policy's maximum.
func TestApproveRefusals(t *testing.T) {
	o := approveWith("bob")
	o.Policy.SignaturesOnly = true
	if err := runApprove(context.Background(), o); exitCode(err) != ExitApproval || !strings.Contains(err.Error(), "policy.signatures_only is set in config c.yaml") {
		t.Errorf("signatures only: %v (exit %d)", err, exitCode(err))
	}
	o = approveWith("alice")
	o.distinct = true
	if err := runApprove(context.Background(), o); exitCode(err) != ExitApproval || !strings.Contains(err.Error(), "alice planned this and cannot approve it") {
		t.Errorf("planner: %v (exit %d)", err, exitCode(err))
	}
	o = approveWith("bob")
	o.ttl = 48 * time.Hour
	o.ReadPlan = func(string, string) (*redrive.Plan, error) {
		t.Error("plan read past a bad TTL")
		return nil, errors.New("read")
	}
	if err := runApprove(context.Background(), o); exitCode(err) != ExitUsage {
		t.Errorf("ttl: %v (exit %d)", err, exitCode(err))
	}
}

// TestResumeOptionsFromTheCommandLine: resume's journal argument, flags
// and settings reach its options; only redrive takes --effects.
func TestResumeOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(map[string]string{"DLQCTL_SOURCE": "dir:q"})
	journal := filepath.Join(t.TempDir(), "p.journal")
	var got *resumeOptions
	capture := func(_ context.Context, o *resumeOptions) error { got = o; return nil }
	execSub(t, f, newResumeCmd(f, "redrive", capture), "resume", journal, "--past-gate", "--retry-failed", "--plan", "p.plan.json",
		"--yes", "--require-distinct-approver", "--effects", "postgres://u:pw@h/db", "--keys-dir", "d")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.Kind != "redrive" || got.Journal != journal || !got.pastGate || !got.retryFailed || got.plan != "p.plan.json" || !got.yes ||
		!got.distinct || got.effects != "postgres://u:pw@h/db" || got.keys.keysDir != "d":
		t.Errorf("options %+v", got)
	case got.IO != io || got.Source != "dir:q" || got.Config != "(no config file)" || !got.Now().Equal(testNow) || got.Getenv("DLQCTL_SOURCE") != "dir:q":
		t.Errorf("settings: source %q, config %q", got.Source, got.Config)
	case got.ApprovalPolicy == nil || got.Confirm == nil || got.Identity == nil || !(planRunner{Runner: got.Runner, Out: got.Out}).complete():
		t.Error("a dependency is missing")
	}
	if newResumeCmd(f, "resolve", capture).Flags().Lookup("effects") != nil {
		t.Error("resolve resume takes --effects")
	}
}

// TestResumeOfAFinishedRun calls resume's run function on the journal of
// a run that completed on a directory queue: under the run's key it says
// there is nothing to resume and prints the run, opening nothing; under
// another key the journal is refused (exit 5) before anything is printed.
func TestResumeOfAFinishedRun(t *testing.T) {
	key := "k-one-0123456789abcdef0123456789abcdef"
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + dirQueue(t), "DLQCTL_APPROVAL_KEY": key})
	plan, journal := filepath.Join(c.dir, "p.json"), filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--rate", "0", "--settle", "0s", "--reason", "fixed", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	c.must(0, "redrive", "apply", plan)

	resume := func(key string) (*resumeOptions, *[]RunDoc, *bytes.Buffer) {
		io, _, _, errOut := TestIO()
		out := &printedRuns{}
		o := &resumeOptions{IO: io, Kind: "redrive", Journal: journal, Now: func() time.Time { return c.now }, Getenv: func(string) string { return "" },
			ApprovalPolicy: func(keyFlags, bool) (redrive.ApprovalPolicy, error) {
				return redrive.ApprovalPolicy{Key: []byte(key), Now: c.now}, nil
			},
			Identity: func(string) string { return "ops" },
			Runner:   redrive.Runner{Sources: openNothing{new(bool)}, Now: func() time.Time { return c.now }},
			Out:      out,
		}
		return o, &out.docs, errOut
	}
	o, printed, errOut := resume(key)
	if err := runResume(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "is complete; nothing to resume") {
		t.Errorf("stderr %q", errOut)
	}
	if len(*printed) != 1 || (*printed)[0].Status != string(redrive.StatusCompleted) || (*printed)[0].Moved != 3 {
		t.Errorf("printed %+v", *printed)
	}
	o, printed, _ = resume("k-two-0123456789abcdef0123456789abcdef")
	if err := runResume(context.Background(), o); exitCode(err) != ExitApproval || len(*printed) != 0 {
		t.Errorf("another key: %v (exit %d), printed %d", err, exitCode(err), len(*printed))
	}
}

// TestPlanShowOptionsFromTheCommandLine: plan show's argument, key flags
// and output settings reach its options.
func TestPlanShowOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *planShowOptions
	execSub(t, f, newPlanShowCmd(f, "redrive", func(_ context.Context, o *planShowOptions) error { got = o; return nil }),
		"show", "p.plan.json", "-o", "markdown", "--allowed-signers", "s")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.Kind != "redrive" || got.Plan != "p.plan.json" || got.keys.allowedSigners != "s":
		t.Errorf("options %+v", got)
	case got.IO != io || got.Report.Format != report.FormatMarkdown:
		t.Errorf("settings: format %q", got.Report.Format)
	case got.PlanApprovals == nil || got.Reviewer.Rules == nil || got.Reviewer.ApprovalPolicy == nil:
		t.Error("a dependency is missing")
	}
}

// TestAChangedPlanIsShownThenRefused: a plan edited after it was made (on
// a directory queue) is still shown by plan show's run function, which
// then exits 5; approve's run function refuses it before any review.
func TestAChangedPlanIsShownThenRefused(t *testing.T) {
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + dirQueue(t), "DLQCTL_APPROVAL_KEY": "k-one-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "p.json")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--reason", "fixed", "--out", plan)
	m := readPlanJSON(t, plan)
	m["reason"] = "something else"
	writePlanJSON(t, plan, m)

	io, _, out, _ := TestIO()
	err := runPlanShow(context.Background(), &planShowOptions{IO: io, Report: report.Options{Format: report.FormatJSON}, Kind: "redrive", Plan: plan,
		PlanApprovals: func(*redrive.Plan, string) error { return nil }})
	if exitCode(err) != ExitApproval || !strings.Contains(out.String(), `"something else"`) {
		t.Errorf("plan show: %v (exit %d); stdout %.200s", err, exitCode(err), out)
	}

	f := c.factory(io, nil)
	o := approveWith("bob")
	o.Plan, o.ReadPlan = plan, planFiles{f.Getenv}.readPlanFor
	o.Review = func(*redrive.Plan, string, string, keyFlags, func(redrive.Approval) bool, bool) error {
		t.Error("a changed plan was reviewed for approval")
		return nil
	}
	if err := runApprove(context.Background(), o); exitCode(err) != ExitApproval || !strings.Contains(err.Error(), plan) {
		t.Errorf("approve: %v (exit %d)", err, exitCode(err))
	}
	if len(readPlanJSON(t, plan)["approvals"].([]any)) != 0 {
		t.Error("the changed plan was approved")
	}
}

// TestWatchDrawsFromItsOptions: --watch's run function refuses a short
// interval and a one-document format before opening anything, and draws
// one NDJSON document of a directory queue with --count 1.
func TestWatchDrawsFromItsOptions(t *testing.T) {
	io, _, out, _ := TestIO()
	opened := false
	o := &statsOptions{IO: io, Report: report.Options{Format: report.FormatNDJSON},
		OpenSession: func(context.Context) (*session, error) { opened = true; return nil, errors.New("opened") }}
	o.watch = watchOptions{watch: true, interval: 500 * time.Millisecond}
	if err := runWatch(context.Background(), o); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--interval 500ms") {
		t.Errorf("short interval: %v", err)
	}
	o.watch.interval, o.Report.Format = time.Second, report.FormatJSON
	if err := runWatch(context.Background(), o); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "not -o json") || opened {
		t.Errorf("-o json: %v, opened %v", err, opened)
	}

	f, _ := optionsFactory(map[string]string{"DLQCTL_SOURCE": "dir:" + dirQueue(t)})
	var got *statsOptions
	execSub(t, f, newStatsCmd(f, func(_ context.Context, o *statsOptions) error { got = o; return nil }),
		"stats", "-o", "ndjson", "--watch", "--interval", "1s", "--count", "1")
	got.IO = io
	if err := runWatch(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	var doc StatsDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Total == 0 || doc.Watch == nil || len(doc.Watch.Timeline) != timelineBuckets {
		t.Errorf("draw: %v; %.300s", err, out)
	}
}

// TestDiscoverFromItsOptions: categorize --discover's run function over
// options a given rule set: the suggested rules file keeps those rules
// (before the templates of unknown) and is stamped with the report's time.
func TestDiscoverFromItsOptions(t *testing.T) {
	f, _ := optionsFactory(map[string]string{"DLQCTL_SOURCE": "dir:" + dirQueue(t)})
	var got *categorizeOptions
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	execSub(t, f, newCategorizeCmd(f, func(_ context.Context, o *categorizeOptions) error { got = o; return nil }),
		"categorize", "--suggest-rules", rules)
	io, _, out, errOut := TestIO()
	got.IO = io
	got.RuleSpecs = func() ([]envelope.RuleSpec, error) {
		return []envelope.RuleSpec{{Name: "kept-rule", Match: "never-matches-anything", Disposition: "drop"}}, nil
	}
	if err := runDiscover(context.Background(), got); err != nil {
		t.Fatalf("%v; %s", err, errOut)
	}
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "kept-rule") || !strings.Contains(text, testNow.Format("2006-01-02T15:04:05Z")) || out.Len() == 0 {
		t.Errorf("rules file:\n%s", text)
	}
}

// TestOneStepOptionsFromTheCommandLine: the one-step form's plan flags,
// --yes, --dry-run and --journal reach its options.
func TestOneStepOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(nil)
	var got *oneStepOptions
	execSub(t, f, newMoveCmd(f, "redrive", func(_ context.Context, o *oneStepOptions) error { got = o; return nil }),
		"redrive", "--category", "transient", "--reason", "fixed", "--yes", "--dry-run", "--journal", "j", "--out", "p.plan.json")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.plan.kind != "redrive" || got.plan.reason != "fixed" || got.plan.out != "p.plan.json" || !slices.Equal(got.plan.sel.categories, []string{"transient"}) ||
		!got.yes || !got.dryRun || got.journal != "j":
		t.Errorf("options %+v", got)
	case got.IO != io || got.Config != "(no config file)" || !got.Started.Equal(testNow):
		t.Errorf("settings: config %q, started %v", got.Config, got.Started)
	case got.OpenSession == nil || got.MakePlan == nil || got.PrintPlan == nil || got.Confirm == nil || got.ApprovalKey == nil || !got.Runner.complete():
		t.Error("a dependency is missing")
	}
}

// TestOneStepRefusals: the one-step run function refuses, opening
// nothing, a run the policy says needs an approval (exit 5) and a run off
// a terminal without --yes (exit 2); --dry-run prints the plan and runs
// nothing.
func TestOneStepRefusals(t *testing.T) {
	opened, ran := false, false
	io, _, _, errOut := TestIO()
	o := &oneStepOptions{IO: io, Config: "config c.yaml", Started: testNow, plan: planFlags{kind: "resolve"},
		OpenSession: func(context.Context) (*session, error) { opened = true; return &session{src: closedSource{}}, nil },
		MakePlan: func(context.Context, *session, *planFlags) (*redrive.Plan, error) {
			return &redrive.Plan{Kind: "resolve"}, nil
		},
		PrintPlan: func(_ *redrive.Plan, path string) error { io.Out.Write([]byte("plan " + path)); return nil },
		Runner:    planRunner{Runner: redrive.Runner{Sources: openNothing{&ran}, Now: time.Now}},
	}
	o.Policy.RequireApproval = true
	if err := runOneStep(context.Background(), o); exitCode(err) != ExitApproval || !strings.Contains(err.Error(), "policy.require_approval is set in config c.yaml") || opened {
		t.Errorf("require approval: %v, opened %v", err, opened)
	}
	o.Policy.RequireApproval = false
	if err := runOneStep(context.Background(), o); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "give --yes to resolve") || opened {
		t.Errorf("no terminal: %v, opened %v", err, opened)
	}
	o.dryRun = true
	if err := runOneStep(context.Background(), o); err != nil || !opened || ran || !strings.Contains(errOut.String(), "(dry run) nothing will be changed") {
		t.Errorf("dry run: %v, opened %v, ran %v", err, opened, ran)
	}
}

// closedSource is a source a run function only closes.
type closedSource struct{ backend.Source }

func (closedSource) Close() error { return nil }

// TestDLQInitOptionsFromTheCommandLine: the URL argument wins over the
// source in effect, which stands in without one; --dry-run reaches the
// options.
func TestDLQInitOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(map[string]string{"DLQCTL_SOURCE": "nats://127.0.0.1:4222?stream=A&consumer=c"})
	var got *dlqInitOptions
	capture := func(_ context.Context, o *dlqInitOptions) error { got = o; return nil }
	execSub(t, f, newDLQCmd(f, capture), "dlq", "init", "nats://127.0.0.1:4222?stream=B&consumer=c", "--dry-run", "-o", "json")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.URL != "nats://127.0.0.1:4222?stream=B&consumer=c" || !got.dryRun:
		t.Errorf("url %q, dry run %v", got.URL, got.dryRun)
	case got.IO != io || got.Report.Format != report.FormatJSON || got.Backends == nil || got.Open.Getenv == nil:
		t.Errorf("settings: format %q", got.Report.Format)
	}
	execSub(t, f, newDLQCmd(f, capture), "dlq", "init")
	if got.URL != "nats://127.0.0.1:4222?stream=A&consumer=c" || got.dryRun {
		t.Errorf("from the source: url %q, dry run %v", got.URL, got.dryRun)
	}
}

// TestDLQInitRunRefusals: dlq init's run function refuses a missing URL
// and a backend that keeps its own dead letters, and a bad URL of one
// that can create one, as usage errors.
func TestDLQInitRunRefusals(t *testing.T) {
	f, _ := optionsFactory(nil)
	for url, want := range map[string]string{
		"":                   "needs a URL",
		"dir:" + t.TempDir(): "nothing to create",
		"nats://127.0.0.1:1?stream=ORDERS&bogus=1": "unknown query parameter",
	} {
		io, _, out, _ := TestIO()
		err := runDLQInit(context.Background(), &dlqInitOptions{IO: io, URL: url, Backends: f.Backends})
		if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), want) || out.Len() > 0 {
			t.Errorf("%q: %v (exit %d), want one saying %q", url, err, exitCode(err), want)
		}
	}
}

// TestUIOptionsFromTheCommandLine: ui's plan flags and folder reach its
// options; --limit is refused before runF.
func TestUIOptionsFromTheCommandLine(t *testing.T) {
	f, io := optionsFactory(map[string]string{"NO_COLOR": "1"})
	var got *uiOptions
	capture := func(_ context.Context, o *uiOptions) error { got = o; return nil }
	execSub(t, f, newUICmd(f, capture), "ui", "--plan-dir", "plans", "--redact", "card", "--reason", "psp back", "--origin", "orders", "--rate", "20")
	switch {
	case got == nil:
		t.Fatal("runF not called")
	case got.planDir != "plans" || !slices.Equal(got.redact, []string{"card"}) || got.plan.kind != "redrive" || got.plan.reason != "psp back" ||
		!slices.Equal(got.plan.sel.origins, []string{"orders"}) || got.plan.rate != 20:
		t.Errorf("options %+v", got)
	case got.IO != io || !got.NoColor || !got.Now().Equal(testNow) || got.OpenSession == nil || got.MakePlanNow == nil:
		t.Errorf("settings: no color %v", got.NoColor)
	}
	got = nil
	root := newUICmd(f, capture)
	root.SetArgs([]string{"--limit", "5"})
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	if err := root.Execute(); err == nil || got != nil {
		t.Errorf("--limit: err %v, runF called %v", err, got != nil)
	}
}

// TestUIRunRefusals: ui's run function refuses, opening nothing, to run
// off a terminal and with a --plan-dir that is not a directory.
func TestUIRunRefusals(t *testing.T) {
	io, _, _, _ := TestIO()
	opened := false
	o := &uiOptions{IO: io, planDir: t.TempDir(), plan: planFlags{kind: "redrive", ramp: "10,50"},
		OpenSession: func(context.Context) (*session, error) { opened = true; return nil, errors.New("opened") }}
	if err := runUI(context.Background(), o); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "ui needs a terminal") {
		t.Errorf("no terminal: %v", err)
	}
	io.InTTY, io.OutTTY = true, true
	o.planDir = filepath.Join(o.planDir, "missing")
	if err := runUI(context.Background(), o); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "not a directory") || opened {
		t.Errorf("plan dir: %v, opened %v", err, opened)
	}
}

// TestPlanRunnerLeavesAStartedRunToResume: the run of an approved plan
// whose journal exists goes no further than saying so: the source is
// never opened, and apply's answer names the journal.
func TestPlanRunnerLeavesAStartedRunToResume(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "p.journal")
	if err := os.WriteFile(journal, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opened := false
	out := &startedRuns{}
	p := planRunner{Runner: redrive.Runner{Sources: openNothing{&opened}, Now: func() time.Time { return testNow }},
		Out: out, Started: testNow, Applier: "ops"}
	err := p.apply(context.Background(), approvedRun{plan: &redrive.Plan{Kind: "redrive"}, planPath: "p.plan.json", journalPath: journal})
	if exitCode(err) != ExitUsage || out.journal != journal || opened {
		t.Errorf("err %v, startedAlready on %q, source opened %v", err, out.journal, opened)
	}
}

// openNothing is a run's source opener in a test where no source may be
// opened: it says whether one was.
type openNothing struct{ opened *bool }

func (o openNothing) OpenSource(context.Context, string) (backend.Source, error) {
	*o.opened = true
	return nil, errors.New("opened")
}

// printedRuns keeps the run documents a run function printed; it must
// print nothing else.
type printedRuns struct {
	runOutput
	docs []RunDoc
}

func (p *printedRuns) printRun(d RunDoc) error { p.docs = append(p.docs, d); return nil }

// startedRuns keeps the journal of apply's "started already" answer; it
// must say nothing else.
type startedRuns struct {
	runOutput
	journal string
}

func (s *startedRuns) startedAlready(_ context.Context, _ *redrive.Plan, _ string, e *redrive.StartedError, _ hintFlags) error {
	s.journal = e.Journal
	return usageErrorf("started")
}

// testBackends are the backends a test's Factory is given: every one, as
// the dlqctl binary has them (main.go).
func testBackends() *backend.Registry { return all.Registry() }
