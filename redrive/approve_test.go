package redrive

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/internal/sshtest"
)

// signers makes keys for the named principals with ssh-keygen and an
// allowed_signers file listing them (a key per line, as written).
func signers(t *testing.T, lines map[string]string) (map[string]*approval.KeySigner, *approval.AllowedSigners) {
	t.Helper()
	dir := t.TempDir()
	keys := map[string]*approval.KeySigner{}
	var text strings.Builder
	for name, listed := range lines {
		path := sshtest.Keygen(t, dir, name, "ed25519", "")
		s, err := approval.LoadSigner(path, "")
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = s
		if listed != "" {
			text.WriteString(listed + " " + sshtest.PublicKey(t, path) + "\n")
		}
	}
	file := filepath.Join(dir, "allowed_signers")
	os.WriteFile(file, []byte(text.String()), 0o600)
	as, err := approval.ReadAllowedSigners(file)
	if err != nil {
		t.Fatal(err)
	}
	return keys, as
}

func TestSignedApprovalsAndQuorum(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	keys, as := signers(t, map[string]string{
		"bob": "bob", "carol": "carol", "eve": "", "ops": "*@ops", "alice": "alice", "git": `dave namespaces="git"`,
	})
	pol := ApprovalPolicy{Signers: as, Required: 2, Now: now.Add(time.Minute)}
	problem := func(p *Plan, pol ApprovalPolicy, want string) {
		t.Helper()
		_, err := p.CheckApprovals(pol)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want a refusal naming %q, got %v", want, err)
		}
	}
	sign := func(p *Plan, who, as string, at time.Time) Approval {
		t.Helper()
		a, err := p.ApproveSigned(keys[who], as, at, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	p := testPlan()
	sign(p, "bob", "bob", now)
	problem(p, pol, "1 more needed")
	sign(p, "bob", "bob", now)
	problem(p, pol, "bob already approved")
	sign(p, "carol", "carol", now)
	ok, err := p.CheckApprovals(pol)
	if err != nil || len(ok) != 2 || ok[0].Principal != "bob" || ok[1].Principal != "carol" {
		t.Fatalf("two distinct listed principals: %v %v", ok, err)
	}
	if v, needed := p.Judge(pol); needed != 0 || !v[0].Counted || v[1].Counted || !v[2].Counted {
		t.Errorf("verdicts %+v, needed %d", v, needed)
	}

	// One key listed under a wildcard signs as two principals: one approval.
	w := testPlan()
	sign(w, "ops", "x@ops", now)
	sign(w, "ops", "y@ops", now)
	problem(w, pol, "one key counts once")

	for name, c := range map[string]struct {
		edit func(p *Plan)
		want string
	}{
		"unlisted key":            {func(p *Plan) { sign(p, "eve", "eve", now) }, "is not listed"},
		"borrowed principal":      {func(p *Plan) { sign(p, "eve", "bob", now) }, "is not listed"},
		"another principal's key": {func(p *Plan) { sign(p, "carol", "bob", now) }, "lists it for carol, not bob"},
		"git-only key":            {func(p *Plan) { sign(p, "git", "dave", now) }, "namespaces git only"},
		"expired":                 {func(p *Plan) { sign(p, "bob", "bob", now.Add(-2*time.Hour)) }, "expired"},
		"edited expiry": {func(p *Plan) {
			sign(p, "bob", "bob", now)
			p.Approvals[0].ExpiresAt = p.Approvals[0].ExpiresAt.Add(time.Hour)
		}, "signature does not verify"},
		"edited name": {func(p *Plan) {
			sign(p, "bob", "bob", now)
			p.Approvals[0].By = "carol"
		}, "differs from the principal"},
		"edited key": {func(p *Plan) {
			sign(p, "bob", "bob", now)
			p.Approvals[0].Key = approval.Fingerprint(keys["carol"].PublicKey())
		}, "edited"},
		"copied from another plan": {func(p *Plan) {
			other := testPlan()
			other.Reason = "another incident"
			other.Seal()
			p.Approvals = append(p.Approvals, sign(other, "bob", "bob", now))
		}, "signed message differs"},
		"git signature replayed": {func(p *Plan) {
			a := Approval{By: "bob", Principal: "bob", At: now, ExpiresAt: now.Add(time.Hour), Key: approval.Fingerprint(keys["bob"].PublicKey())}
			a.Signature, _ = approval.Sign(keys["bob"], "git", p.Message(a))
			p.Approvals = append(p.Approvals, a)
		}, `namespace "git"`},
		"hmac under signatures_only": {func(p *Plan) {
			p.Approve([]byte("0123456789abcdef0123456789abcdef"), "bob", now, time.Hour)
		}, "signatures_only"},
		"planner": {func(p *Plan) { sign(p, "alice", "alice", now) }, "planner cannot approve"},
	} {
		t.Run(name, func(t *testing.T) {
			p := testPlan()
			c.edit(p)
			one := pol
			one.Required, one.SignaturesOnly, one.DistinctApprover, one.Key = 1, true, true, []byte("0123456789abcdef0123456789abcdef")
			problem(p, one, c.want)
		})
	}

	// The applier is not an approver under the distinct policy.
	a := testPlan()
	sign(a, "bob", "bob", now)
	problem(a, ApprovalPolicy{Signers: as, Now: now, DistinctApprover: true, Applier: "bob"}, "the applier cannot approve")
	// No allowed_signers file: a signature cannot be checked.
	problem(a, ApprovalPolicy{Now: now}, "no allowed_signers file")
}

// An approval given in the same second as a halt, but after it, counts.
func TestApprovalAfterAHaltInTheSameSecond(t *testing.T) {
	halt := time.Date(2026, 11, 29, 12, 0, 0, 400_000_000, time.UTC)
	key := []byte("0123456789abcdef0123456789abcdef")
	p := testPlan()
	p.Approve(key, "bob", halt.Add(-300*time.Millisecond), time.Hour)
	if _, err := p.CheckApprovals(ApprovalPolicy{Key: key, Now: halt.Add(time.Second), After: halt}); err == nil {
		t.Error("an approval before the halt counted")
	}
	p.Approve(key, "carol", halt.Add(300*time.Millisecond), time.Hour)
	b, _ := p.Approvals[1].At.MarshalJSON()
	if !strings.Contains(string(b), ".7") {
		t.Errorf("the approval time lost its fraction: %s", b)
	}
	if _, err := p.CheckApprovals(ApprovalPolicy{Key: key, Now: halt.Add(time.Second), After: halt}); err != nil {
		t.Errorf("an approval 300 ms after the halt: %v", err)
	}
}

func TestTrustRunAndDistrust(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	keys, as := signers(t, map[string]string{"bob": "bob", "eve": ""})
	p := testPlan()
	good, _ := p.ApproveSigned(keys["bob"], "bob", now, time.Hour)
	forged, _ := p.ApproveSigned(keys["eve"], "eve", now, time.Hour)
	pol := ApprovalPolicy{Signers: as, Now: now.Add(48 * time.Hour)}
	tr, err := p.TrustRun(Record{Type: RecRunStart, Approval: &good}, pol)
	if err != nil || !tr.Unauthenticated || tr.Key != nil {
		t.Errorf("a signed run (its approval expired since): %+v %v", tr, err)
	}
	if _, err := p.TrustRun(Record{Type: RecRunStart, Approvals: []Approval{good, forged}}, pol); err == nil {
		t.Error("a run-start naming an unlisted signer was believed")
	}
	mac, _ := testPlan().Approve([]byte("0123456789abcdef0123456789abcdef"), "bob", now, time.Hour)
	if _, err := p.TrustRun(Record{Type: RecRunStart, Approval: &mac}, ApprovalPolicy{Key: []byte("0123456789abcdef0123456789abcdef")}); err == nil {
		t.Error("an HMAC run without a chained journal was believed")
	}

	st := newState("r", p)
	st.note(Record{Type: RecPublished, Seq: 1, DestID: "d"})
	st.Distrust()
	if st.Step(1) != RecIntent {
		t.Errorf("after Distrust a published step is %q, want intent", st.Step(1))
	}
}

// A journal that says "published" for entries never sent (a hand-written
// journal of a signed run): after Distrust, a non-atomic mover without a
// destination lookup (Kafka, SQS, Pulsar) sends them before removing them;
// without Distrust the journal's word alone would remove them unsent.
func TestDistrustedJournalNeverRemovesUnsentEntries(t *testing.T) {
	for _, distrust := range []bool{true, false} {
		q := newFakeQueue(8, false)
		journal := filepath.Join(t.TempDir(), "j")
		eng, _ := newEngine(t, q, journal)
		eng.Chunk = 4
		eng.Crash = crashAfter(RecBatchStart, 1)
		st, _ := eng.Start("run1", q.planFor(t, []int{8}), "p", "fake", "t", nil)
		runUntilCrash(eng, st)
		j, _ := OpenJournal(journal, time.Now)
		for seq := int64(1); seq <= 8; seq++ {
			j.Append(Record{Type: RecPublished, Seq: seq, DestID: "forged"})
		}
		j.Close()
		recs, _ := ReadJournal(journal)
		st = Replay(st.Plan, recs)
		if distrust {
			st.Distrust()
		}
		eng2, _ := newEngine(t, q, journal)
		eng2.Resume(st, "t", nil)
		if err := eng2.Run(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		lost := 8 - len(q.inbox) - len(q.dlq)
		if distrust && lost != 0 {
			t.Errorf("distrusted: %d entries removed from the DLQ without reaching the destination", lost)
		}
		if !distrust && lost == 0 {
			t.Error("the test cannot fail: a believed forged journal lost nothing")
		}
	}
}
