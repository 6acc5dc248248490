package redrive

import (
	"context"
	"encoding/json"
	"fmt"
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
			p.Approvals[0].ExpiresAt = approval.NewStamp(p.Approvals[0].ExpiresAt.Add(time.Hour))
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
			a := Approval{By: "bob", Principal: "bob", At: approval.NewStamp(now), ExpiresAt: approval.NewStamp(now.Add(time.Hour)), Key: approval.Fingerprint(keys["bob"].PublicKey())}
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

// One approver counts once whatever kinds of approval they gave, and
// toward a quorum of two or more an HMAC approval is shown but never
// counted: the applying host holds the HMAC key and could make it.
func TestAQuorumCountsSignaturesOnly(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	keys, as := signers(t, map[string]string{"bob": "bob", "carol": "carol"})
	hmacKey := []byte("k-one-0123456789abcdef0123456789abcdef")
	pol := ApprovalPolicy{Signers: as, Key: hmacKey, Required: 2, Now: now.Add(time.Minute)}
	for _, by := range []string{"bob", "mallory"} {
		p := testPlan()
		p.ApproveSigned(keys["bob"], "bob", now, time.Hour)
		p.Approve(hmacKey, by, now, time.Hour)
		v, needed := p.Judge(pol)
		if needed != 1 || !v[0].Counted || v[1].Counted || v[1].Problem != "" || !strings.Contains(v[1].Uncounted, "an HMAC approval; toward a quorum of 2") {
			t.Errorf("bob's signature and an HMAC by %s: needed %d, verdicts %+v", by, needed, v)
		}
		if _, err := p.CheckApprovals(pol); err == nil || !strings.Contains(err.Error(), "approval by "+by+": not counted: an HMAC approval") {
			t.Errorf("bob's signature and an HMAC by %s: %v", by, err)
		}
	}
	// Under a quorum of one, a name's signature and HMAC are one approver:
	// with two required by name (an HMAC by bob beside bob's signature)
	// the second is named as a repeat, not counted.
	p := testPlan()
	p.Approve(hmacKey, "bob", now, time.Hour)
	p.ApproveSigned(keys["bob"], "bob", now, time.Hour)
	one := pol
	one.Required = 1
	if v, needed := p.Judge(one); needed != 0 || !v[0].Counted || v[1].Counted {
		t.Errorf("quorum of one: needed %d, verdicts %+v", needed, v)
	}
	two := testPlan()
	two.ApproveSigned(keys["bob"], "bob", now, time.Hour)
	two.ApproveSigned(keys["carol"], "carol", now, time.Hour)
	if _, err := two.CheckApprovals(pol); err != nil {
		t.Errorf("two signing principals: %v", err)
	}
}

// The lifetime cap and the clock hold for every approval checked, not
// only for those approve wrote.
func TestApprovalTimesAreJudgedWhenChecked(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	keys, as := signers(t, map[string]string{"bob": "bob"})
	pol := ApprovalPolicy{Signers: as, Now: now}
	for name, c := range map[string]struct {
		at, expires time.Time
		pol         func(ApprovalPolicy) ApprovalPolicy
		want        string
	}{
		"ten years":           {now, now.AddDate(10, 0, 0), nil, "valid for 87672h (2026-11-29T12:00:00Z to 2036-11-29T12:00:00Z), longer than an approval may last, 24h (policy.max_approval_ttl)"},
		"over a policy's cap": {now, now.Add(9 * time.Hour), func(p ApprovalPolicy) ApprovalPolicy { p.MaxTTL = 8 * time.Hour; return p }, "valid for 9h"},
		"from 2030":           {time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC), nil, "given at 2030-01-01T00:00:00Z, later than this host's clock (2026-11-29T12:00:00Z) by more than the 5m clock skew allowed"},
		"six minutes ahead":   {now.Add(6 * time.Minute), now.Add(time.Hour), nil, "later than this host's clock"},
		"expires before":      {now, now.Add(-time.Minute), nil, "expires at 2026-11-29T11:59:00Z, not after it was given"},
		"four minutes ahead":  {now.Add(4 * time.Minute), now.Add(time.Hour), nil, ""},
		"24h":                 {now.Add(-time.Hour), now.Add(23 * time.Hour), nil, ""},
	} {
		p := testPlan()
		a := Approval{By: "bob", Principal: "bob", At: approval.NewStamp(c.at), ExpiresAt: approval.NewStamp(c.expires), Key: approval.Fingerprint(keys["bob"].PublicKey())}
		a.Signature, _ = approval.Sign(keys["bob"], approval.Namespace, p.Message(a))
		p.Approvals = append(p.Approvals, a)
		pp := pol
		if c.pol != nil {
			pp = c.pol(pol)
		}
		v, _ := p.Judge(pp)
		if c.want == "" && v[0].Problem != "" || !strings.Contains(v[0].Problem, c.want) {
			t.Errorf("%s: %q, want %q", name, v[0].Problem, c.want)
		}
	}
}

// A signature is over an approval's times exactly as written: a time in
// another RFC 3339 form verifies when it was signed so, survives the plan
// being rewritten, and a time re-written after signing does not verify.
func TestAnApprovalIsSignedOverItsTimesAsWritten(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	keys, as := signers(t, map[string]string{"bob": "bob"})
	p := testPlan()
	msg := func(at, exp string) []byte { return approval.Message(p.Digest, "bob", at, exp) }
	sig, _ := approval.Sign(keys["bob"], approval.Namespace, msg("2026-11-29T13:00:00+01:00", "2026-11-29T12:30:00.500Z"))
	fp := approval.Fingerprint(keys["bob"].PublicKey())
	doc := fmt.Sprintf(`{"by":"bob","principal":"bob","at":"2026-11-29T13:00:00+01:00","expires_at":"2026-11-29T12:30:00.500Z","key":%q,"signature":%q}`, fp, sig)
	var a Approval
	if err := json.Unmarshal([]byte(doc), &a); err != nil {
		t.Fatal(err)
	}
	p.Approvals = []Approval{a}
	pol := ApprovalPolicy{Signers: as, Now: now}
	if _, err := p.CheckApprovals(pol); err != nil {
		t.Errorf("signed over the times as written: %v", err)
	}
	path := filepath.Join(t.TempDir(), "p.json")
	if err := WritePlan(path, p); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"at": "2026-11-29T13:00:00+01:00"`) || !strings.Contains(string(b), `"expires_at": "2026-11-29T12:30:00.500Z"`) {
		t.Errorf("the plan rewritten changed the times' text:\n%s", b)
	}
	back, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := back.CheckApprovals(pol); err != nil {
		t.Errorf("after the plan was rewritten: %v", err)
	}
	// The same instant written in UTC: not what was signed.
	p.Approvals[0].At = approval.NewStamp(p.Approvals[0].At.Time)
	if _, err := p.CheckApprovals(pol); err == nil || !strings.Contains(err.Error(), "signed message differs") {
		t.Errorf("a time re-written after signing: %v", err)
	}
}
