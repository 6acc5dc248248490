package redrive

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/effects"
)

func TestJudge(t *testing.T) {
	const fp = "sha256:aa"
	cases := []struct {
		name  string
		rec   effects.Record
		found bool
		back  bool
		want  string
	}{
		{"applied", effects.Record{Attempts: 1, Effects: 1, Fingerprint: fp}, true, false, VerdictApplied},
		{"applied, fingerprint not recorded", effects.Record{Attempts: 1, Effects: 1}, true, false, VerdictApplied},
		{"fingerprint case differs", effects.Record{Attempts: 1, Effects: 1, Fingerprint: "SHA256:AA"}, true, false, VerdictApplied},
		{"absorbed duplicate", effects.Record{Attempts: 3, Effects: 1, Fingerprint: fp}, true, false, VerdictAbsorbedDuplicate},
		{"duplicate effect", effects.Record{Attempts: 2, Effects: 2, Fingerprint: fp}, true, false, VerdictDuplicateEffect},
		{"conflict outranks the rest", effects.Record{Attempts: 1, Effects: 2, Fingerprint: "sha256:bb"}, true, true, VerdictConflict},
		{"back in the DLQ", effects.Record{Attempts: 1, Effects: 0, Fingerprint: fp}, true, true, VerdictReDeadLettered},
		{"back in the DLQ, consumer never saw it", effects.Record{}, false, true, VerdictReDeadLettered},
		{"not seen yet", effects.Record{}, false, false, VerdictPending},
		{"seen, no effect yet", effects.Record{Attempts: 1}, true, false, VerdictPending},
	}
	for _, c := range cases {
		if got := Judge(fp, c.rec, c.found, c.back); got != c.want {
			t.Errorf("%s: Judge = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestGates(t *testing.T) {
	cases := []struct {
		verdicts map[string]int
		ratio    float64
		want     string
	}{
		{map[string]int{VerdictApplied: 9, VerdictAbsorbedDuplicate: 1}, 0, GatePass},
		{map[string]int{VerdictApplied: 9, VerdictDuplicateEffect: 1}, 0.5, GateDuplicateEffect},
		{map[string]int{VerdictApplied: 9, VerdictConflict: 1}, 0.5, GateConflict},
		{map[string]int{VerdictApplied: 9, VerdictPending: 1}, 0.5, GatePending},
		{map[string]int{VerdictApplied: 9, VerdictReDeadLettered: 1}, 0, GateReDeadLettered},
		{map[string]int{VerdictApplied: 9, VerdictReDeadLettered: 1}, 0.1, GatePass},
		{map[string]int{VerdictApplied: 8, VerdictReDeadLettered: 2}, 0.1, GateReDeadLettered},
		{map[string]int{VerdictUnverified: 10}, 0, GatePass},
	}
	for _, c := range cases {
		b := BatchReport{Verdicts: c.verdicts}
		for _, n := range c.verdicts {
			b.UniqueEvents += n
		}
		b.ApplyGates(c.ratio)
		if b.Gate != c.want {
			t.Errorf("%v at ratio %g: gate %s (%s), want %s", c.verdicts, c.ratio, b.Gate, b.GateReason, c.want)
		}
		if b.Passed() != (c.want == GatePass) {
			t.Errorf("%v: Passed() = %v", c.verdicts, b.Passed())
		}
	}
}

func testPlan() *Plan {
	p := &Plan{
		Schema: PlanSchema, Kind: KindRedrive, Reason: "payments fixed", PlannedBy: "alice",
		PlannedAt: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Source: "dir:/q",
		Params:  Params{Rate: 50, Burst: 10, Ramp: []int{10, 50, 200}, Settle: Duration(30 * time.Second)},
		Entries: NewEntries(Entry{Seq: 1, ID: "a", EventID: "E1", Fingerprint: "sha256:01", Category: "transient", Dest: "orders"}),
	}
	if err := p.Seal(); err != nil {
		panic(err)
	}
	return p
}

func TestPlanDigestCoversEveryField(t *testing.T) {
	p := testPlan()
	if err := p.Verify(); err != nil {
		t.Fatal(err)
	}
	edits := map[string]func(*Plan){
		"reason":      func(p *Plan) { p.Reason += "!" },
		"rate":        func(p *Plan) { p.Params.Rate = 0 },
		"entry":       func(p *Plan) { en := p.Entries.At(0); en.Fingerprint = "sha256:02"; p.Entries.Set(0, en) },
		"destination": func(p *Plan) { en := p.Entries.At(0); en.Dest = "payments"; p.Entries.Set(0, en) },
		"planner":     func(p *Plan) { p.PlannedBy = "mallory" },
		"extra entry": func(p *Plan) { p.Entries.Append(Entry{Seq: 2, ID: "b"}) },
	}
	for name, edit := range edits {
		q := testPlan()
		edit(q)
		if err := q.Verify(); err == nil {
			t.Errorf("changing the %s did not break the digest", name)
		}
	}
	// Approvals are outside the digest: adding one keeps it valid.
	if _, err := p.Approve([]byte("k"), "bob", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(); err != nil {
		t.Errorf("an approval changed the digest: %v", err)
	}
}

func TestPlanFileRoundTripAndOneByteTamper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := WritePlan(path, testPlan()); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("plan mode %v, want 0600", st.Mode().Perm())
	}
	p, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(); err != nil {
		t.Fatalf("a written plan does not verify: %v", err)
	}
	data, _ := os.ReadFile(path)
	tampered := strings.Replace(string(data), `"E1"`, `"E2"`, 1)
	if err := os.WriteFile(path, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(); err == nil || !strings.Contains(err.Error(), "digest mismatch") {
		t.Errorf("one changed byte: Verify = %v, want a digest mismatch", err)
	}
}

func TestApprovals(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	key := []byte("approval-key")
	check := func(p *Plan, pol ApprovalPolicy) error {
		_, err := p.CheckApproval(pol)
		return err
	}
	p := testPlan()
	if err := check(p, ApprovalPolicy{Key: key, Now: now}); err == nil || !strings.Contains(err.Error(), "no approval") {
		t.Errorf("unapproved: %v", err)
	}
	if _, err := p.Approve(key, "bob", now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := check(p, ApprovalPolicy{Key: key, Now: now.Add(time.Minute)}); err != nil {
		t.Errorf("valid approval refused: %v", err)
	}
	if err := check(p, ApprovalPolicy{Key: []byte("other"), Now: now}); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("wrong key: %v", err)
	}
	if err := check(p, ApprovalPolicy{Key: key, Now: now.Add(2 * time.Hour)}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	forged := *p
	forged.Approvals = []Approval{p.Approvals[0]}
	forged.Approvals[0].ExpiresAt = approval.NewStamp(now.Add(48 * time.Hour))
	if err := check(&forged, ApprovalPolicy{Key: key, Now: now.Add(2 * time.Hour)}); err == nil {
		t.Error("an approval whose expiry was edited still verifies")
	}
	self := testPlan()
	if _, err := self.Approve(key, "alice", now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := check(self, ApprovalPolicy{Key: key, Now: now, DistinctApprover: true}); err == nil || !strings.Contains(err.Error(), "planner cannot approve") {
		t.Errorf("planner approving under the distinct policy: %v", err)
	}
	if err := check(self, ApprovalPolicy{Key: key, Now: now}); err != nil {
		t.Errorf("planner approving without the policy: %v", err)
	}
}

func TestJournalSurvivesAPartialLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.journal")
	now := func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	j, err := CreateJournal(path, now)
	if err != nil {
		t.Fatal(err)
	}
	p := testPlan()
	if err := j.Append(Record{Type: RecRunStart, RunID: "r1", Plan: p}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Type: RecIntent, RunID: "r1", Seq: 1, ID: "a"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := CreateJournal(path, now); err == nil {
		t.Error("CreateJournal overwrote an existing journal")
	}
	// A crash in the middle of writing the next record.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"published","seq":1,"dest_`)
	f.Close()
	recs, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	st := Replay(nil, recs)
	if st.Step(1) != RecIntent {
		t.Errorf("step after a torn write = %q, want intent", st.Step(1))
	}
	j, err = OpenJournal(path, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Type: RecPublished, RunID: "r1", Seq: 1, DestID: "x"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	recs, err = ReadJournal(path)
	if err != nil {
		t.Fatalf("after resuming the torn journal: %v", err)
	}
	if st := Replay(nil, recs); st.Step(1) != RecPublished {
		t.Errorf("step = %q, want published", st.Step(1))
	}
}
