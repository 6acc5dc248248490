package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/internal/sshtest"
	"github.com/dlqctl/dlqctl/redrive"
)

// signedSetup is an approvers' world: keys made with ssh-keygen (bob's in a
// key file, carol's only in a real ssh-agent, eve's unlisted, alice the
// planner), an allowed_signers file, and a config whose policy asks for two
// distinct signed approvers. The applying host has the allowed_signers file
// and nothing else: no private key, no agent, no HMAC key.
type signedSetup struct {
	c                      *cli
	q, plan, journal, conf string
	keys                   map[string]string
	allowed                string
	agent                  string
}

func newSignedSetup(t *testing.T) *signedSetup {
	q := dirQueue(t)
	s := newSigners(t, "dir:"+q, "--category", "transient", "--max", "12", "--ramp", "4")
	s.q = q
	return s
}

// newSigners makes the approvers' world for a DLQ at source and plans
// with planArgs.
func newSigners(t *testing.T, source string, planArgs ...string) *signedSetup {
	s := &signedSetup{keys: map[string]string{}}
	keyDir := t.TempDir()
	var allowed strings.Builder
	for _, name := range []string{"alice", "bob", "carol", "eve"} {
		typ := map[string]string{"alice": "ed25519", "bob": "ed25519", "carol": "ecdsa", "eve": "ed25519"}[name]
		s.keys[name] = sshtest.Keygen(t, keyDir, name, typ, "")
		if name != "eve" {
			fmt.Fprintf(&allowed, "%s@example.com %s\n", name, sshtest.PublicKey(t, s.keys[name]))
		}
	}
	s.agent = sshtest.Agent(t)
	sshtest.Add(t, s.agent, s.keys["carol"])
	// carol's private key lives only in her agent from now on.
	os.Remove(s.keys["carol"])
	s.c = newCLI(t, map[string]string{"DLQCTL_SOURCE": source})
	s.allowed = filepath.Join(s.c.dir, "allowed_signers")
	os.WriteFile(s.allowed, []byte(allowed.String()), 0o644)
	s.conf = filepath.Join(s.c.dir, "dlqctl.yaml")
	os.WriteFile(s.conf, []byte(fmt.Sprintf("policy:\n  allowed_signers: %s\n  approvals_required: 2\n  distinct_approver: true\n  signatures_only: true\n", s.allowed)), 0o644)
	s.plan = filepath.Join(s.c.dir, "p.json")
	s.journal = filepath.Join(s.c.dir, "p.journal")
	s.c.must(0, append([]string{"redrive", "plan", "--rate", "0", "--settle", "0s",
		"--reason", "psp fixed", "--by", "alice@example.com", "--out", s.plan}, planArgs...)...)
	return s
}

// approve runs approve as an approver on their own machine: with their
// agent when signing through it.
func (s *signedSetup) approve(want int, args ...string) string {
	s.c.t.Helper()
	defer delete(s.c.env, "SSH_AUTH_SOCK")
	for _, a := range args {
		if strings.HasSuffix(a, ".pub") {
			s.c.env["SSH_AUTH_SOCK"] = s.agent
		}
	}
	_, stderr := s.c.must(want, append([]string{"--config", s.conf, "redrive", "approve"}, args...)...)
	return stderr
}

func (s *signedSetup) apply(plan string, want int) string {
	s.c.t.Helper()
	_, stderr := s.c.must(want, "--config", s.conf, "redrive", "apply", plan, "--journal", plan+".journal")
	return stderr
}

func copyFile(t *testing.T, from, to string) string {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

func readPlanJSON(t *testing.T, path string) map[string]any {
	var m map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writePlanJSON(t *testing.T, path string, m map[string]any) {
	b, _ := json.MarshalIndent(m, "", "  ")
	os.WriteFile(path, b, 0o600)
}

// On a host with only an allowed_signers file, apply moves a plan signed
// by two listed principals (one from a key file, one through ssh-agent)
// and refuses every forgery with exit 5, moving nothing.
func TestSignedApprovalsGateApply(t *testing.T) {
	s := newSignedSetup(t)
	c, dir := s.c, s.c.dir
	errDir, inbox := filepath.Join(s.q, "error"), filepath.Join(s.q, "inbox")
	before := countFiles(t, errDir)
	variant := func(name string) string { return copyFile(t, s.plan, filepath.Join(dir, name+".json")) }
	refused := func(plan, want string) {
		t.Helper()
		stderr := s.apply(plan, ExitApproval)
		if !strings.Contains(stderr, want) {
			t.Errorf("%s: want a refusal naming %q, got: %s", filepath.Base(plan), want, stderr)
		}
		if n := countFiles(t, inbox); n != 0 {
			t.Fatalf("%s: a refused apply moved %d entries", filepath.Base(plan), n)
		}
	}

	refused(s.plan, "no approval")

	// approve with no private key to sign with: bob's public key, no agent.
	if stderr := s.approve(ExitApproval, variant("nokey"), "--sign-with", s.keys["bob"]+".pub"); !strings.Contains(stderr, "no private key to sign with") {
		t.Errorf("approve without a private key: %s", stderr)
	}
	// approve refuses an unlisted key and the planner before signing.
	if stderr := s.approve(ExitApproval, variant("eve0"), "--sign-with", s.keys["eve"]); !strings.Contains(stderr, "is not listed") {
		t.Errorf("approve with an unlisted key: %s", stderr)
	}
	if stderr := s.approve(ExitApproval, variant("alice0"), "--sign-with", s.keys["alice"]); !strings.Contains(stderr, "cannot approve") {
		t.Errorf("the planner approving: %s", stderr)
	}

	// One approval: one more needed.
	one := variant("one")
	s.approve(0, one, "--sign-with", s.keys["bob"])
	refused(one, "1 more needed")

	// A repeated principal counts once.
	twice := copyFile(t, one, filepath.Join(dir, "twice.json"))
	s.approve(0, twice, "--sign-with", s.keys["bob"], "--again")
	refused(twice, "bob@example.com already approved")

	// An unlisted key, its approval made where no allowed_signers is known.
	eve := copyFile(t, one, filepath.Join(dir, "eve.json"))
	c.must(0, "redrive", "approve", eve, "--sign-with", s.keys["eve"], "--by", "eve@example.com")
	refused(eve, "is not listed")
	// eve signing under carol's name.
	borrowed := copyFile(t, one, filepath.Join(dir, "borrowed.json"))
	c.must(0, "redrive", "approve", borrowed, "--sign-with", s.keys["eve"], "--by", "carol@example.com")
	refused(borrowed, "is not listed")

	// An HMAC approval is refused under signatures_only.
	hmac := copyFile(t, one, filepath.Join(dir, "hmac.json"))
	c.env["DLQCTL_APPROVAL_KEY"] = "k-one-0123456789abcdef0123456789abcdef"
	c.must(0, "redrive", "approve", hmac, "--by", "carol@example.com")
	delete(c.env, "DLQCTL_APPROVAL_KEY")
	refused(hmac, "signatures_only")

	// An edited approval: carol's expiry moved on by a day.
	edited := copyFile(t, one, filepath.Join(dir, "edited.json"))
	s.approve(0, edited, "--sign-with", s.keys["carol"]+".pub")
	m := readPlanJSON(t, edited)
	a := m["approvals"].([]any)[1].(map[string]any)
	exp, _ := time.Parse(time.RFC3339Nano, a["expires_at"].(string))
	a["expires_at"] = exp.Add(24 * time.Hour).Format(time.RFC3339Nano)
	writePlanJSON(t, edited, m)
	refused(edited, "signature does not verify")

	// An approval copied from another plan.
	other := filepath.Join(dir, "other.json")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--rate", "0", "--settle", "0s", "--reason", "another", "--by", "alice@example.com", "--out", other)
	s.approve(0, other, "--sign-with", s.keys["carol"]+".pub")
	copied := copyFile(t, one, filepath.Join(dir, "copied.json"))
	m = readPlanJSON(t, copied)
	m["approvals"] = append(m["approvals"].([]any), readPlanJSON(t, other)["approvals"].([]any)[0])
	writePlanJSON(t, copied, m)
	refused(copied, "signed message differs")

	// A git commit signature by carol, over the very message, replayed.
	gitsig := copyFile(t, one, filepath.Join(dir, "git.json"))
	s.approve(0, gitsig, "--sign-with", s.keys["carol"]+".pub")
	m = readPlanJSON(t, gitsig)
	a = m["approvals"].([]any)[1].(map[string]any)
	a["signature"] = sshSign(t, s.agent, s.keys["carol"]+".pub", "git", approvalMessage(m["digest"].(string), a))
	writePlanJSON(t, gitsig, m)
	refused(gitsig, `namespace "git"`)

	// Expired: both approvals outlived.
	expired := variant("expired")
	s.approve(0, expired, "--sign-with", s.keys["bob"], "--ttl", "2m")
	s.approve(0, expired, "--sign-with", s.keys["carol"]+".pub", "--ttl", "2m")
	c.now = c.now.Add(10 * time.Minute)
	refused(expired, "expired")

	// Over the TTL cap.
	if stderr := s.approve(ExitUsage, variant("long"), "--sign-with", s.keys["bob"], "--ttl", "48h"); !strings.Contains(stderr, "over the longest") {
		t.Errorf("--ttl 48h: %s", stderr)
	}

	if n := countFiles(t, errDir); n != before {
		t.Fatalf("refused applies changed the DLQ: %d entries, want %d", n, before)
	}

	// bob hands over a detached approval; carol signs through her agent.
	s.approve(0, s.plan, "--sign-with", s.keys["bob"], "--detach")
	detached := readPlanJSON(t, s.plan+".approval-bob@example.com")
	fields := map[string]bool{}
	paths(detached, "", map[string]bool{}, fields)
	for _, f := range documented(t)["dlqctl.approval/v1"] {
		if !fields[f] && !strings.HasSuffix(f, "hmac") {
			t.Errorf("the detached approval has no %s (docs/json.md)", f)
		}
		delete(fields, f)
	}
	if len(fields) > 0 || detached["schema"] != "dlqctl.approval/v1" {
		t.Errorf("the detached approval has fields docs/json.md does not list: %v", fields)
	}
	s.approve(0, s.plan, "--sign-with", s.keys["carol"]+".pub")
	out, _ := c.must(0, "--config", s.conf, "redrive", "show", s.plan)
	for _, want := range []string{"bob@example.com", "carol@example.com", "SHA256:", "valid", "0 more needed"} {
		if !strings.Contains(out, want) {
			t.Errorf("redrive show does not list %q:\n%s", want, out)
		}
	}
	s.apply(s.plan, 0)
	if n := countFiles(t, inbox); n != 12 {
		t.Errorf("inbox has %d entries, want 12", n)
	}

	// Anyone can check the approval by hand with ssh-keygen -Y verify.
	m = readPlanJSON(t, s.plan)
	a = m["approvals"].([]any)[0].(map[string]any)
	sigFile := filepath.Join(dir, "carol.sig")
	os.WriteFile(sigFile, []byte(a["signature"].(string)), 0o600)
	verify := exec.Command("ssh-keygen", "-Y", "verify", "-f", s.allowed, "-I", "carol@example.com", "-n", "dlqctl-approval", "-s", sigFile)
	verify.Stdin = bytes.NewReader(approvalMessage(m["digest"].(string), a))
	if out, err := verify.CombinedOutput(); err != nil {
		t.Errorf("ssh-keygen -Y verify refused a dlqctl approval: %v\n%s", err, out)
	}
}

// approvalMessage builds the signed message from the plan file's fields,
// as docs/approvals.md tells anyone to (printf with the fields as written).
func approvalMessage(digest string, a map[string]any) []byte {
	return fmt.Appendf(nil, "dlqctl-approval/v1\nplan %s\nprincipal %s\nat %s\nexpires %s\n", digest, a["principal"], a["at"], a["expires_at"])
}

// sshSign signs message with ssh-keygen -Y sign through the agent.
func sshSign(t *testing.T, agent, pub, namespace string, message []byte) string {
	dir := t.TempDir()
	msg := filepath.Join(dir, "m")
	os.WriteFile(msg, message, 0o600)
	cmd := exec.Command("ssh-keygen", "-Y", "sign", "-f", pub, "-n", namespace, msg)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+agent)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(msg + ".sig")
	return string(b)
}

// The red-team cases of the HMAC journal, in signature mode: a journal the
// applying host could write by hand never removes an entry that did not
// reach its destination, and never resumes a run without valid approvals.
func TestSignedRunJournalIsNotTakenOnItsWord(t *testing.T) {
	s := newSignedSetup(t)
	c := s.c
	s.approve(0, s.plan, "--sign-with", s.keys["bob"])
	s.approve(0, s.plan, "--sign-with", s.keys["carol"]+".pub")
	c.crashAt("published", 1, "--config", s.conf, "redrive", "apply", s.plan)
	errDir, inbox := filepath.Join(s.q, "error"), filepath.Join(s.q, "inbox")
	total := countFiles(t, errDir) + countFiles(t, inbox)
	lines := readLines(t, s.journal)
	if strings.Contains(lines[0], `"mac"`) {
		t.Error("a signed run's journal is chained with a key the host would have to hold")
	}
	noLoss := func(what string) {
		t.Helper()
		if n := countFiles(t, errDir) + countFiles(t, inbox); n != total {
			t.Fatalf("%s: %d entries in the DLQ and the inbox, want %d: one was lost", what, n, total)
		}
	}

	// The approvals taken out of the run-start: the policy needs them.
	noApproval := filepath.Join(c.dir, "no-approval.journal")
	edited := append([]string(nil), lines...)
	edited[0] = strings.Replace(edited[0], `"approvals":[`, `"x":[`, 1)
	writeLines(t, noApproval, edited)
	if _, stderr := c.must(ExitApproval, "--config", s.conf, "redrive", "resume", noApproval, "--yes"); !strings.Contains(stderr, "without an approval") {
		t.Errorf("resume without the run's approvals: %s", stderr)
	}
	// One approval swapped for eve's (unlisted).
	var p redrive.Plan
	b, _ := os.ReadFile(s.plan)
	json.Unmarshal(b, &p)
	eve := filepath.Join(c.dir, "eve.json")
	copyFile(t, s.plan, eve)
	c.must(0, "redrive", "approve", eve, "--sign-with", s.keys["eve"], "--by", "eve@example.com")
	var ep redrive.Plan
	b, _ = os.ReadFile(eve)
	json.Unmarshal(b, &ep)
	ej, _ := json.Marshal(ep.Approvals[len(ep.Approvals)-1])
	var start map[string]json.RawMessage
	json.Unmarshal([]byte(lines[0]), &start)
	var aps []json.RawMessage
	json.Unmarshal(start["approvals"], &aps)
	aps[1] = ej
	start["approvals"], _ = json.Marshal(aps)
	forgedStart, _ := json.Marshal(start)
	withEve := filepath.Join(c.dir, "eve.journal")
	writeLines(t, withEve, append([]string{string(forgedStart) + "\n"}, lines[1:]...))
	if _, stderr := c.must(ExitApproval, "--config", s.conf, "redrive", "resume", withEve); !strings.Contains(stderr, "is not listed") {
		t.Errorf("resume of a run-start naming eve: %s", stderr)
	}
	// A host whose allowed_signers does not list the approvers.
	os.WriteFile(s.allowed+".empty", nil, 0o644)
	c.must(ExitApproval, "--config", s.conf, "redrive", "resume", s.journal, "--allowed-signers", s.allowed+".empty")
	noLoss("refused resumes")

	// Forged published steps for entries still in the DLQ: resume sends
	// them rather than deleting them unsent.
	forged := filepath.Join(c.dir, "forged.journal")
	f := append([]string(nil), lines...)
	f[len(f)-1] += "\n"
	for _, en := range p.Entries.Slice()[4:7] {
		rec, _ := json.Marshal(redrive.Record{Type: redrive.RecPublished, Seq: en.Seq, DestID: "x"})
		f = append(f, string(rec)+"\n")
	}
	f[len(f)-1] = strings.TrimSuffix(f[len(f)-1], "\n")
	writeLines(t, forged, f)
	copyFile(t, forged, s.journal)
	delete(c.env, "DLQCTL_SOURCE")
	out, _ := c.must(0, "-o", "json", "--config", s.conf, "redrive", "resume", s.journal)
	noLoss("the resume of a forged journal")
	if d := runJSON(t, out); d.Moved != 12 || d.Status != redrive.StatusCompleted {
		t.Errorf("resumed run: status %s, moved %d; want completed, 12", d.Status, d.Moved)
	}
	if n := countFiles(t, inbox); n != 12 {
		t.Errorf("inbox has %d entries, want 12: forged published steps removed entries unsent", n)
	}
}

// doctor names the principals of the allowed_signers file, or says why it
// does not parse; completion offers SSH keys to sign with.
func TestDoctorAndCompletionKnowSSHKeys(t *testing.T) {
	s := newSignedSetup(t)
	out, _ := s.c.must(0, "--config", s.conf, "doctor")
	if !strings.Contains(out, "allowed signers\tpass") || !strings.Contains(out, "alice@example.com, bob@example.com, carol@example.com") ||
		!strings.Contains(out, "approval key\tpass\tnot used") {
		t.Errorf("doctor with an allowed_signers file:\n%s", out)
	}
	bad := filepath.Join(s.c.dir, "bad_signers")
	os.WriteFile(bad, []byte("bob ssh-ed25519 not-a-key\n"), 0o644)
	out, _ = s.c.must(ExitError, "--config", s.conf, "doctor", "--allowed-signers", bad)
	if !strings.Contains(out, "allowed signers\tfail\tallowed signers "+bad+": line 1") {
		t.Errorf("doctor with a broken allowed_signers file:\n%s", out)
	}

	home := t.TempDir()
	os.Mkdir(filepath.Join(home, ".ssh"), 0o700)
	copyFile(t, s.keys["bob"], filepath.Join(home, ".ssh", "id_ed25519"))
	copyFile(t, s.keys["bob"]+".pub", filepath.Join(home, ".ssh", "id_ed25519.pub"))
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte("x"), 0o600)
	s.c.env["HOME"] = home
	out, _ = s.c.must(0, "__complete", "redrive", "approve", s.plan, "--sign-with", "")
	if !strings.Contains(out, filepath.Join(home, ".ssh", "id_ed25519.pub")) || !strings.Contains(out, filepath.Join(home, ".ssh", "id_ed25519")+"\n") ||
		strings.Contains(out, "known_hosts") {
		t.Errorf("completion of --sign-with:\n%s", out)
	}
}

// On Redis: a plan signed by two listed principals applies on a host with
// only allowed_signers; after a crash, forged published steps in the
// unchained journal lose nothing.
func TestSignedApprovalsOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	seedRedis(t, rdb, "dlq", "E1", "E2", "E3", "E4", "E5", "E6")
	s := newSigners(t, srv.URL(0, "dlq"), "--category", "transient", "--ramp", "2")
	s.apply(s.plan, ExitApproval)
	s.approve(0, s.plan, "--sign-with", s.keys["bob"], "--detach")
	s.approve(0, s.plan, "--sign-with", s.keys["carol"]+".pub")
	s.c.crashAt("intent", 2, "--config", s.conf, "redrive", "apply", s.plan)
	var p redrive.Plan
	b, _ := os.ReadFile(s.plan)
	json.Unmarshal(b, &p)
	lines := readLines(t, s.journal)
	lines[len(lines)-1] += "\n"
	for _, en := range p.Entries.Slice()[2:] {
		rec, _ := json.Marshal(redrive.Record{Type: redrive.RecPublished, Seq: en.Seq, DestID: "0-1"})
		lines = append(lines, string(rec)+"\n")
	}
	lines[len(lines)-1] = strings.TrimSuffix(lines[len(lines)-1], "\n")
	writeLines(t, s.journal, lines)
	out, _ := s.c.must(0, "-o", "json", "--config", s.conf, "redrive", "resume", s.journal)
	if d := runJSON(t, out); d.Moved != 6 {
		t.Errorf("moved %d, want 6", d.Moved)
	}
	ctx := context.Background()
	if n, _ := rdb.XLen(ctx, "orders").Result(); n != 6 {
		t.Errorf("orders has %d entries, want 6", n)
	}
	if n, _ := rdb.XLen(ctx, "dlq").Result(); n != 0 {
		t.Errorf("the DLQ has %d entries, want 0", n)
	}
}

// Going on past a gate in signature mode needs the quorum afresh, given
// after the halt; resolve takes signed approvals as redrive does.
func TestSignedPastGateAndResolve(t *testing.T) {
	q := dirQueue(t)
	dbPath := filepath.Join(t.TempDir(), "effects.db")
	db := emptyInbox(t, dbPath)
	s := newSigners(t, "dir:"+q, "--category", "transient", "--max", "12", "--ramp", "2,5", "--effects", "sqlite:"+dbPath)
	s.approve(0, s.plan, "--sign-with", s.keys["bob"])
	s.approve(0, s.plan, "--sign-with", s.keys["carol"]+".pub", "--detach")
	s.apply(s.plan, ExitGate)
	catchUp(t, db, s.plan)
	_, stderr := s.c.must(ExitApproval, "--config", s.conf, "redrive", "resume", s.plan+".journal", "--past-gate")
	if !strings.Contains(stderr, "fresh approval") {
		t.Errorf("--past-gate under the approvals the run started with: %s", stderr)
	}
	s.approve(0, s.plan, "--sign-with", s.keys["bob"], "--again")
	_, stderr = s.c.must(ExitApproval, "--config", s.conf, "redrive", "resume", s.plan+".journal", "--past-gate")
	if !strings.Contains(stderr, "1 more needed") {
		t.Errorf("--past-gate with one fresh approval of two: %s", stderr)
	}
	s.approve(0, s.plan, "--sign-with", s.keys["carol"]+".pub", "--again", "--detach")
	out, _ := s.c.must(0, "-o", "json", "--config", s.conf, "redrive", "resume", s.plan+".journal", "--past-gate")
	if d := runJSON(t, out); d.Moved != 12 || d.ApprovedBy != "bob@example.com, carol@example.com" {
		t.Errorf("moved %d, approved by %q", d.Moved, d.ApprovedBy)
	}

	r := filepath.Join(s.c.dir, "r.json")
	s.c.must(0, "resolve", "plan", "--category", "missing-reference", "--max", "3", "--reason", "deleted upstream", "--by", "alice@example.com", "--out", r)
	for _, who := range []string{s.keys["bob"], s.keys["carol"] + ".pub"} {
		s.c.env["SSH_AUTH_SOCK"] = s.agent
		s.c.must(0, "--config", s.conf, "resolve", "approve", r, "--sign-with", who)
		delete(s.c.env, "SSH_AUTH_SOCK")
	}
	out, _ = s.c.must(0, "-o", "json", "--config", s.conf, "resolve", "apply", r)
	if d := runJSON(t, out); d.Moved != 3 {
		t.Errorf("resolve moved %d, want 3", d.Moved)
	}
}
