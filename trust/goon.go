package trust

import (
	"fmt"
	"slices"
	"time"

	"github.com/dlqctl/dlqctl/redrive"
)

// Resumed is what a run that resume is asked to go on with brings to the
// going-on rule: its plan, the approvals its journal records, those given
// since, and how it stopped.
type Resumed struct {
	// Plan is the run's plan, its digest checked against the journal's.
	Plan *redrive.Plan
	// Started are the approvals the run-start records; Recorded every
	// approval the journal records (the run-start's, then those earlier
	// resumes went on under).
	Started, Recorded []redrive.Approval
	// Given are the approvals in the plan file and beside it now.
	Given []redrive.Approval
	// HaltedAt is when a gate halted the run, when one did (zero when the
	// run stopped otherwise).
	HaltedAt time.Time
	// Signed: the journal is chained with the approval key in effect.
	Signed bool
}

// Going is how a resumed run goes on.
type Going struct {
	How GoingOn
	// Under are the approvals it goes on under (How is UnderApprovals).
	Under []redrive.Approval
	// Fresh are Under when they are not the run-start's: the resume
	// record names them, so that status shows every approval the run went
	// on under.
	Fresh []redrive.Approval
}

// NotApproved is a refusal to go on (exit 5), where the rest of this
// package's errors are usage errors. PastGate says the run was halted by
// a gate, so that only approvals given since count: the command says how
// to give one.
type NotApproved struct {
	Reason   string
	PastGate bool
}

func (e *NotApproved) Error() string { return e.Reason }

// GoOn decides whether and how a resumed run may go on, from the policy
// (config names where it was read), the approval policy in effect now
// (pol: keys, signers, clock) and what the run brings. A run started
// under approvals, or halted by a gate, goes on only under approvals that
// meet the policy now, chosen from those its journal records and those
// given since; after a halt, only those given after it. One approval
// found twice (recorded in the journal and still in the plan file) is
// one candidate. Every error it returns is a *NotApproved.
func GoOn(p Policy, config string, pol redrive.ApprovalPolicy, r Resumed) (Going, error) {
	halted := !r.HaltedAt.IsZero()
	g := Going{How: HowGoingOn(p, len(r.Started), halted, r.Signed)}
	switch g.How {
	case Refused:
		return g, &NotApproved{Reason: fmt.Sprintf("the run started without an approval, and %s is set in %s", RequiredBy(p), config)}
	case AskYes, AsStarted:
		return g, nil
	}
	if halted {
		pol.After = r.HaltedAt
	}
	check := *r.Plan
	check.Approvals = distinct(r.Recorded, r.Given)
	ok, err := check.CheckApprovals(pol)
	if err != nil {
		return g, &NotApproved{Reason: "not approved to go on: " + err.Error(), PastGate: halted}
	}
	g.Under = ok
	if !slices.EqualFunc(ok, r.Started, sameApproval) {
		g.Fresh = ok
	}
	return g, nil
}

// distinct is every approval of the lists, each once, in order.
func distinct(lists ...[]redrive.Approval) []redrive.Approval {
	var out []redrive.Approval
	for _, l := range lists {
		for _, a := range l {
			if !slices.ContainsFunc(out, func(b redrive.Approval) bool { return sameApproval(a, b) }) {
				out = append(out, a)
			}
		}
	}
	return out
}

// sameApproval: the same approval read from two places (a journal's
// record and the plan file): every field as written is the same.
func sameApproval(a, b redrive.Approval) bool {
	return a.By == b.By && a.Principal == b.Principal && a.Key == b.Key && a.HMAC == b.HMAC && a.Signature == b.Signature &&
		a.At.Text() == b.At.Text() && a.ExpiresAt.Text() == b.ExpiresAt.Text()
}

// WentOnVerdicts judges the approvals a journal record says a run went on
// under as of that record: at its time, by whom ran the run then, and,
// after a halt, against the halt. What `status` shows of a past run: an
// approval that has expired since was still valid then; one that never
// met the policy (an HMAC toward a quorum, a lifetime over the cap, a
// date ahead of the record) is named as such.
func WentOnVerdicts(pol redrive.ApprovalPolicy, plan *redrive.Plan, w redrive.WentOn) []redrive.Verdict {
	pol.Now, pol.After, pol.Applier = w.At, w.HaltedAt, w.By
	check := *plan
	check.Approvals = w.Approvals
	v, _ := check.Judge(pol)
	return v
}
