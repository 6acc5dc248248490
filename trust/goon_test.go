package trust

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/redrive"
)

// goOnPlan is a sealed plan with one entry, and approvals made with key.
func goOnPlan(t *testing.T) *redrive.Plan {
	t.Helper()
	p := &redrive.Plan{Schema: redrive.PlanSchema, Kind: redrive.KindRedrive, Reason: "r", PlannedBy: "alice",
		PlannedAt: time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), Source: "dir:/q",
		Entries: redrive.NewEntries(redrive.Entry{Seq: 1, ID: "a", EventID: "E1", Fingerprint: "sha256:01"})}
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGoOn(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	key := []byte(goodKey)
	p := goOnPlan(t)
	approve := func(by string, at time.Time) redrive.Approval {
		a, err := p.Approve(key, by, at, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	bob := approve("bob", now.Add(-30*time.Minute))
	carol := approve("carol", now.Add(-5*time.Minute))
	halt := now.Add(-10 * time.Minute)
	pol := redrive.ApprovalPolicy{Key: key, Now: now}
	strict := Policy{RequireApproval: true}

	for _, tc := range []struct {
		name   string
		p      Policy
		r      Resumed
		how    GoingOn
		under  []string
		fresh  bool
		refuse string // part of the refusal ("" for none)
		gate   bool
	}{
		{name: "as it started", r: Resumed{Started: []redrive.Approval{bob}, Recorded: []redrive.Approval{bob}, Given: []redrive.Approval{bob}},
			how: UnderApprovals, under: []string{"bob"}},
		{name: "past a gate under the approval it started with, found twice: named once",
			r:   Resumed{Started: []redrive.Approval{bob}, Recorded: []redrive.Approval{bob}, Given: []redrive.Approval{bob}, HaltedAt: halt},
			how: UnderApprovals, refuse: "not approved to go on: approval by bob: given at 2026-11-29T11:30:00Z, before the run was halted at 2026-11-29T11:50:00Z", gate: true},
		{name: "past a gate under one given since", r: Resumed{Started: []redrive.Approval{bob}, Recorded: []redrive.Approval{bob}, Given: []redrive.Approval{bob, carol}, HaltedAt: halt},
			how: UnderApprovals, under: []string{"carol"}, fresh: true},
		{name: "a halted one-step run", r: Resumed{Given: []redrive.Approval{carol}, HaltedAt: halt},
			how: UnderApprovals, under: []string{"carol"}, fresh: true},
		{name: "a one-step run under a strict policy", p: strict, r: Resumed{Signed: true},
			how: Refused, refuse: "the run started without an approval, and policy.require_approval is set in config c.yaml"},
		{name: "an unsigned one-step run", r: Resumed{}, how: AskYes},
		{name: "a signed one-step run", r: Resumed{Signed: true}, how: AsStarted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Plan = p
			g, err := GoOn(tc.p, "config c.yaml", pol, tc.r)
			if g.How != tc.how {
				t.Errorf("how %v, want %v", g.How, tc.how)
			}
			var na *NotApproved
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuse != "" && (!errors.As(err, &na) || !strings.Contains(err.Error(), tc.refuse) || na.PastGate != tc.gate):
				t.Errorf("refusal %v, want one naming %q (past a gate: %v)", err, tc.refuse, tc.gate)
			case tc.refuse != "" && strings.Count(err.Error(), "approval by bob") > 1:
				t.Errorf("the refusal names bob's approval more than once: %v", err)
			}
			var under []string
			for _, a := range g.Under {
				under = append(under, a.By)
			}
			if strings.Join(under, ",") != strings.Join(tc.under, ",") || (g.Fresh != nil) != tc.fresh {
				t.Errorf("under %v (fresh %v), want %v (fresh %v)", under, g.Fresh != nil, tc.under, tc.fresh)
			}
		})
	}
}

// status judges what a run went on under as of then: an approval that
// expired since was valid; one given ahead of the run, or toward a quorum
// as an HMAC, never was.
func TestWentOnVerdicts(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	key := []byte(goodKey)
	p := goOnPlan(t)
	bob, _ := p.Approve(key, "bob", now.Add(-time.Minute), time.Hour)
	carol, _ := p.Approve(key, "carol", now.Add(time.Hour), time.Hour)
	pol := redrive.ApprovalPolicy{Key: key, Now: now.Add(48 * time.Hour)}
	v := WentOnVerdicts(pol, p, redrive.WentOn{Record: redrive.RecRunStart, At: now, Approvals: []redrive.Approval{bob, carol}})
	if v[0].Problem != "" || !v[0].Counted || !strings.Contains(v[1].Problem, "later than this host's clock") {
		t.Errorf("verdicts %+v", v)
	}
	pol.Required = 2
	if v := WentOnVerdicts(pol, p, redrive.WentOn{At: now, Approvals: []redrive.Approval{bob}}); !strings.Contains(v[0].Uncounted, "an HMAC approval") {
		t.Errorf("an HMAC toward a quorum of 2: %+v", v)
	}
}

func TestHMACRefusedBy(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{}, ""},
		{Policy{ApprovalsRequired: 1, AllowedSigners: "x"}, ""},
		{Policy{ApprovalsRequired: 2}, "policy.approvals_required"},
		{Policy{SignaturesOnly: true, ApprovalsRequired: 3}, "policy.signatures_only"},
	} {
		if got := HMACRefusedBy(tc.p); got != tc.want {
			t.Errorf("HMACRefusedBy(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}
