package cmd

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/internal/sshtest"
	"github.com/dlqctl/dlqctl/redrive"
)

// handSigned is an approval made as an approver without dlqctl would make
// one: the message docs/approvals.md gives, with the times written as at
// and expires, signed with `ssh-keygen -Y sign` (bob's key file; carol's
// key through her agent).
func handSigned(t *testing.T, s *signedSetup, who, principal, digest, at, expires string) map[string]any {
	t.Helper()
	key := s.keys[who]
	if _, err := os.Stat(key); err != nil {
		key += ".pub"
	}
	msg := fmt.Appendf(nil, "dlqctl-approval/v1\nplan %s\nprincipal %s\nat %s\nexpires %s\n", digest, principal, at, expires)
	return map[string]any{"by": principal, "principal": principal, "at": at, "expires_at": expires,
		"key": fingerprintOf(t, s.keys[who]+".pub"), "signature": sshSign(t, s.agent, key, approval.Namespace, msg)}
}

func fingerprintOf(t *testing.T, pub string) string {
	b, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return approval.Fingerprint(k)
}

// addApprovals writes approvals into the plan file, after those it has.
func addApprovals(t *testing.T, plan string, as ...map[string]any) {
	t.Helper()
	m := readPlanJSON(t, plan)
	list, _ := m["approvals"].([]any)
	for _, a := range as {
		list = append(list, a)
	}
	m["approvals"] = list
	writePlanJSON(t, plan, m)
}

// catchUp is the consumer catching up after a gate: every event of the
// plan has its one effect in the inbox.
func catchUp(t *testing.T, db *sql.DB, plan string) {
	t.Helper()
	var p redrive.Plan
	b, _ := os.ReadFile(plan)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	for en := range p.Entries.All() {
		if _, err := db.Exec(`INSERT OR IGNORE INTO inbox VALUES (?, ?, 'done', 1, 1)`, en.EventID, en.Fingerprint); err != nil {
			t.Fatal(err)
		}
	}
}

// haltedRun plans 12 entries of c's DLQ with an effects store that no
// consumer writes and the ramp 2,5, approves the plan as bob (HMAC) and
// applies it until the pending gate halts it. It returns the plan, its
// journal, the apply's stderr and the effects store.
func haltedRun(t *testing.T, c *cli) (plan, journal, stderr string, db *sql.DB) {
	t.Helper()
	dbPath := filepath.Join(c.dir, "effects.db")
	db = emptyInbox(t, dbPath)
	plan, journal = filepath.Join(c.dir, "p.json"), filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "12", "--ramp", "2,5", "--rate", "0", "--settle", "0s",
		"--effects", "sqlite:"+dbPath, "--reason", "psp fixed", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	_, stderr = c.must(ExitGate, "redrive", "apply", plan)
	return plan, journal, stderr, db
}

// approvalStates reads the approvals table of `redrive show` (piped: tab
// separated): each approver's state, in order.
func approvalStates(out string) map[string][]string {
	states := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 5 && strings.Contains(f[0], "@") {
			states[f[0]] = append(states[f[0]], f[4])
		}
	}
	return states
}

// Under a quorum of two, one person is one approval whatever kinds they
// gave, and an HMAC approval — which the applying host, holding the HMAC
// key, could make under any name — is shown but never counted.
func TestAQuorumCountsSignaturesOnly(t *testing.T) {
	s := newSignedSetup(t)
	c, dir := s.c, s.c.dir
	// The default: signatures_only off, beside allowed_signers. The
	// applying host holds the HMAC key, as it must to verify HMACs.
	conf := filepath.Join(dir, "quorum.yaml")
	os.WriteFile(conf, []byte("policy:\n  allowed_signers: "+s.allowed+"\n  approvals_required: 2\n"), 0o644)
	c.env["DLQCTL_APPROVAL_KEY"] = "k-one-0123456789abcdef0123456789abcdef"
	inbox := filepath.Join(s.q, "inbox")

	for _, hmacBy := range []string{"bob@example.com", "mallory"} {
		plan := copyFile(t, s.plan, filepath.Join(dir, "hmac-"+hmacBy+".json"))
		c.must(0, "--config", conf, "redrive", "approve", plan, "--sign-with", s.keys["bob"])
		// An HMAC approval made where the policy is not read (as anyone
		// holding the key can make one).
		c.must(0, "redrive", "approve", plan, "--by", hmacBy)
		_, stderr := c.must(ExitApproval, "--config", conf, "redrive", "apply", plan)
		if !strings.Contains(stderr, "approval by "+hmacBy+": not counted: an HMAC approval; toward a quorum of 2") || !strings.Contains(stderr, "1 more needed") {
			t.Errorf("bob's signature and an HMAC by %s under a quorum of 2: %s", hmacBy, stderr)
		}
		if n := countFiles(t, inbox); n != 0 {
			t.Fatalf("a refused apply moved %d entries", n)
		}
		out, _ := c.must(0, "--config", conf, "redrive", "show", plan)
		if !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(hmacBy)+`\thmac\t.*\tnot counted: an HMAC approval; toward a quorum of 2 \(policy.approvals_required\) only SSH signatures count`).MatchString(out) ||
			!strings.Contains(out, "Approvals: 1 more needed") {
			t.Errorf("redrive show of bob's signature and an HMAC by %s:\n%s", hmacBy, out)
		}
	}

	// approve refuses an HMAC approval that would not count.
	if _, stderr := c.must(ExitApproval, "--config", conf, "redrive", "approve", copyFile(t, s.plan, filepath.Join(dir, "x.json")), "--by", "bob@example.com"); !strings.Contains(stderr, "policy.approvals_required is set in config "+conf+", and an HMAC approval would not count") {
		t.Errorf("approve with the HMAC key under a quorum: %s", stderr)
	}

	// doctor warns, and the warning fails nothing.
	out, _ := c.must(0, "--config", conf, "doctor")
	if !regexp.MustCompile(`(?m)^hmac approvals\twarn\tpolicy.signatures_only is off beside allowed_signers: HMAC approvals are shown but never counted toward policy.approvals_required \(2\)\tset policy.signatures_only: true`).MatchString(out) {
		t.Errorf("doctor under a quorum with signatures_only off:\n%s", out)
	}
	one := filepath.Join(dir, "one.yaml")
	os.WriteFile(one, []byte("policy:\n  allowed_signers: "+s.allowed+"\n"), 0o644)
	if out, _ := c.must(0, "--config", one, "doctor"); !strings.Contains(out, "hmac approvals\twarn\tpolicy.signatures_only is off beside allowed_signers: an HMAC approval alone lets a run go") {
		t.Errorf("doctor with signatures_only off:\n%s", out)
	}
	if out, _ := c.must(0, "--config", s.conf, "doctor"); strings.Contains(out, "hmac approvals") {
		t.Errorf("doctor warns under signatures_only:\n%s", out)
	}

	// Two signing principals meet it, an HMAC beside them or not.
	plan := copyFile(t, s.plan, filepath.Join(dir, "two.json"))
	c.must(0, "redrive", "approve", plan, "--by", "mallory")
	c.must(0, "--config", conf, "redrive", "approve", plan, "--sign-with", s.keys["bob"])
	c.env["SSH_AUTH_SOCK"] = s.agent
	c.must(0, "--config", conf, "redrive", "approve", plan, "--sign-with", s.keys["carol"]+".pub")
	delete(c.env, "SSH_AUTH_SOCK")
	out, _ = c.must(0, "-o", "json", "--config", conf, "redrive", "apply", plan)
	if d := runJSON(t, out); d.Moved != 12 || d.ApprovedBy != "bob@example.com, carol@example.com" {
		t.Errorf("two signatures: moved %d, approved by %q", d.Moved, d.ApprovedBy)
	}
}

// The lifetime cap and the clock are judged whenever an approval is
// checked: approvals signed by hand with ssh-keygen, for ten years or
// dated in 2030, are refused (exit 5) and shown invalid with the reason,
// by apply, show, resume past a gate and status alike.
func TestHandSignedApprovalTimesAreJudgedAtEveryCheck(t *testing.T) {
	q := dirQueue(t)
	dbPath := filepath.Join(t.TempDir(), "effects.db")
	db := emptyInbox(t, dbPath)
	s := newSigners(t, "dir:"+q, "--category", "transient", "--max", "12", "--ramp", "2,5", "--effects", "sqlite:"+dbPath)
	c, dir := s.c, s.c.dir
	digest := readPlanJSON(t, s.plan)["digest"].(string)
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	next := c.now.Add(time.Minute) // the clock of the next command
	tenYears := handSigned(t, s, "bob", "bob@example.com", digest, rfc(next), rfc(next.AddDate(10, 0, 0)))
	future := handSigned(t, s, "bob", "bob@example.com", digest, "2030-01-01T00:00:00Z", "2030-01-01T01:00:00Z")

	for name, c0 := range map[string]struct {
		a    map[string]any
		want string
	}{
		"ten years": {tenYears, `valid for \d+h \(\S+ to \S+\), longer than an approval may last, 24h \(policy.max_approval_ttl\)`},
		"2030":      {future, `given at 2030-01-01T00:00:00Z, later than this host's clock \(\S+\) by more than the 5m clock skew allowed`},
	} {
		plan := copyFile(t, s.plan, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json"))
		addApprovals(t, plan, c0.a)
		s.approve(0, plan, "--sign-with", s.keys["carol"]+".pub")
		stderr := s.apply(plan, ExitApproval)
		if !regexp.MustCompile(`approval by bob@example.com: ` + c0.want).MatchString(stderr) {
			t.Errorf("apply under an approval %s: %s", name, stderr)
		}
		out, _ := c.must(0, "--config", s.conf, "redrive", "show", plan)
		if st := approvalStates(out)["bob@example.com"]; len(st) != 1 || !regexp.MustCompile(`^`+c0.want).MatchString(st[0]) {
			t.Errorf("redrive show of an approval %s: %q\n%s", name, st, out)
		}
	}
	if n := countFiles(t, filepath.Join(q, "inbox")); n != 0 {
		t.Fatalf("refused applies moved %d entries", n)
	}

	// Three minutes ahead is within the clock skew.
	next = c.now.Add(2 * time.Minute) // after carol's approval, the apply
	ahead := handSigned(t, s, "bob", "bob@example.com", digest, rfc(next.Add(3*time.Minute)), rfc(next.Add(time.Hour)))
	addApprovals(t, s.plan, ahead)
	s.approve(0, s.plan, "--sign-with", s.keys["carol"]+".pub")
	s.apply(s.plan, ExitGate)

	// Past the gate: approvals dated in 2030 would pass "given after the
	// halt" at every later gate.
	catchUp(t, db, s.plan)
	later := handSigned(t, s, "carol", "carol@example.com", digest, "2030-01-01T00:00:00Z", "2030-01-01T01:00:00Z")
	addApprovals(t, s.plan, future, later)
	journal := s.plan + ".journal"
	_, stderr := c.must(ExitApproval, "--config", s.conf, "redrive", "resume", journal, "--past-gate")
	for _, who := range []string{"bob", "carol"} {
		if !strings.Contains(stderr, "approval by "+who+"@example.com: given at 2030-01-01T00:00:00Z, later than this host's clock") {
			t.Errorf("--past-gate under %s's approval dated 2030: %s", who, stderr)
		}
	}

	// status judges what a journal says a run went on under, as of then:
	// a run-start naming the ten-year approval (a journal written by hand,
	// or by a version that did not check) shows why it never held.
	lines := readLines(t, journal)
	tj, _ := json.Marshal(tenYears)
	lines[0] = regexp.MustCompile(`"approvals":\[\{.*?"principal":"bob@example.com"[^}]*\}`).ReplaceAllLiteralString(lines[0], `"approvals":[`+string(tj))
	edited := filepath.Join(dir, "edited.journal")
	writeLines(t, edited, lines)
	out, _ := c.must(0, "--config", s.conf, "redrive", "status", edited, "--plan", s.plan)
	if !regexp.MustCompile(`(?m)^bob@example.com\tSHA256:\S+\t.*\trun-start \S+\tvalid for \d+h .*longer than an approval may last`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^carol@example.com\tSHA256:\S+\t.*\trun-start \S+\tvalid$`).MatchString(out) {
		t.Errorf("status of a run started under a ten-year approval:\n%s", out)
	}
}

// resume --past-gate's refusal says each thing once, names the journal
// and the plan by their paths and gives times to the second; after the
// run went on, the summary and status name every approval it went on
// under.
func TestPastGateRefusalAndEveryApprovalTheRunWentOnUnder(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-one-0123456789abcdef0123456789abcdef"})
	c.now = c.now.Add(123456789 * time.Nanosecond) // times with a fraction of a second
	plan, journal, _, db := haltedRun(t, c)
	catchUp(t, db, plan)

	_, stderr := c.must(ExitApproval, "redrive", "resume", journal, "--past-gate")
	switch {
	case strings.Count(stderr, "approval by bob") != 1:
		t.Errorf("the refusal names bob's approval %d times, want once: %s", strings.Count(stderr, "approval by bob"), stderr)
	case !strings.Contains(stderr, "journal "+journal+" ") || !strings.Contains(stderr, "dlqctl redrive approve "+plan+" --again"):
		t.Errorf("the refusal does not name the journal and the plan by their paths: %s", stderr)
	case strings.Contains(stderr, "PLAN"):
		t.Errorf("the refusal says PLAN for the plan's path: %s", stderr)
	case regexp.MustCompile(`\d\d:\d\d:\d\d\.\d`).MatchString(stderr) || !regexp.MustCompile(`given at 2026-11-29T\d\d:\d\d:\d\dZ, before the run was halted at 2026-11-29T\d\d:\d\d:\d\dZ`).MatchString(stderr):
		t.Errorf("the refusal's times are not RFC 3339 to the second: %s", stderr)
	}

	c.must(0, "redrive", "approve", plan, "--by", "carol")
	out, _ := c.must(0, "-o", "json", "redrive", "resume", journal, "--past-gate")
	d := runJSON(t, out)
	if d.ApprovedBy != "bob, carol" || len(d.Approvals) != 2 || d.Approvals[0].By != "bob" || d.Approvals[0].Record != "run-start" ||
		d.Approvals[1].By != "carol" || d.Approvals[1].Record != "resume" || d.Approvals[1].Key != "hmac" {
		t.Errorf("the resume's summary: approved by %q, approvals %+v", d.ApprovedBy, d.Approvals)
	}
	out, _ = c.must(0, "redrive", "status", journal)
	if !regexp.MustCompile(`(?m)^approved by\tbob; carol \(on resume at 2026-11-29T\d\d:\d\d:\d\dZ\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^carol\thmac\t.*\tresume 2026-\S+\tvalid$`).MatchString(out) {
		t.Errorf("status after a past-gate resume:\n%s", out)
	}
}

// docsRecipe is the hand check of docs/approvals.md: the sh block under
// "Check an approval by hand", as written there.
func docsRecipe(t *testing.T) string {
	b, err := os.ReadFile("../docs/approvals.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Check an approval by hand\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	recipe, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 || !strings.Contains(recipe, "ssh-keygen -Y verify") {
		t.Fatal("docs/approvals.md has no sh block with ssh-keygen -Y verify under \"Check an approval by hand\"")
	}
	return recipe
}

// The hand check in docs/approvals.md, run as written in a POSIX shell,
// verifies exactly the signed approvals dlqctl accepts: made by approve,
// handed over beside the plan, and signed by hand with times written in
// other RFC 3339 forms, kept as written when approve rewrites the plan;
// and an approval whose times were re-written after signing is refused by
// both.
func TestTheDocsHandCheckVerifiesEveryApprovalDlqctlAccepts(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q})
	c.now = c.now.Add(987654321 * time.Nanosecond)
	keyDir := t.TempDir()
	s := &signedSetup{c: c, keys: map[string]string{}, agent: sshtest.Agent(t)}
	var allowed strings.Builder
	names := []string{"made", "detached", "offset", "zeros", "utc-offset", "comma", "rewritten", "hand-detached"}
	for _, n := range names {
		s.keys[n] = sshtest.Keygen(t, keyDir, n, "ed25519", "")
		fmt.Fprintf(&allowed, "%s@example.com %s\n", n, sshtest.PublicKey(t, s.keys[n]))
	}
	s.allowed = filepath.Join(c.dir, "allowed_signers")
	os.WriteFile(s.allowed, []byte(allowed.String()), 0o644)
	conf := filepath.Join(c.dir, "dlqctl.yaml")
	os.WriteFile(conf, []byte("policy:\n  allowed_signers: "+s.allowed+"\n  signatures_only: true\n"), 0o644)
	plan := filepath.Join(c.dir, "inc2211.plan.json")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--rate", "0", "--reason", "r", "--out", plan)
	digest := readPlanJSON(t, plan)["digest"].(string)

	base := c.now.Truncate(time.Second)
	at := func(d time.Duration, zone *time.Location, layout string) string {
		return base.Add(d).In(zone).Format(layout)
	}
	plus1, minus530 := time.FixedZone("", 3600), time.FixedZone("", -5*3600-30*60)
	addApprovals(t, plan,
		handSigned(t, s, "offset", "offset@example.com", digest, at(0, plus1, time.RFC3339), at(time.Hour, plus1, time.RFC3339)),
		handSigned(t, s, "zeros", "zeros@example.com", digest, at(0, time.UTC, "2006-01-02T15:04:05.000000Z07:00"), at(time.Hour, minus530, "2006-01-02T15:04:05.000Z07:00")),
		handSigned(t, s, "utc-offset", "utc-offset@example.com", digest, at(0, time.UTC, "2006-01-02T15:04:05+00:00"), at(time.Hour, time.UTC, "2006-01-02T15:04:05-00:00")),
		handSigned(t, s, "comma", "comma@example.com", digest, at(0, time.UTC, "2006-01-02T15:04:05,000Z07:00"), at(time.Hour, time.UTC, time.RFC3339)),
	)
	// Signed over the UTC form, then written in another: a rewrite of
	// what was signed.
	rewritten := handSigned(t, s, "rewritten", "rewritten@example.com", digest, at(0, time.UTC, time.RFC3339), at(time.Hour, time.UTC, time.RFC3339))
	rewritten["at"] = at(0, plus1, time.RFC3339)
	addApprovals(t, plan, rewritten)
	hand := map[string]any{"schema": "dlqctl.approval/v1", "plan_digest": digest,
		"approval": handSigned(t, s, "hand-detached", "hand-detached@example.com", digest, at(0, minus530, time.RFC3339), at(30*time.Minute, plus1, time.RFC3339))}
	hb, _ := json.Marshal(hand)
	os.WriteFile(plan+".approval-hand-detached@example.com", hb, 0o600)
	// approve rewrites the plan: the hand-written times stay as written.
	c.must(0, "--config", conf, "redrive", "approve", plan, "--sign-with", s.keys["made"])
	c.must(0, "--config", conf, "redrive", "approve", plan, "--sign-with", s.keys["detached"], "--detach")

	out, _ := c.must(0, "--config", conf, "redrive", "show", plan)
	dlqctl := map[string]bool{}
	for who, st := range approvalStates(out) {
		dlqctl[strings.TrimSuffix(who, "@example.com")] = len(st) == 1 && st[0] == "valid"
	}
	run := exec.Command("sh", "-c", docsRecipe(t))
	run.Dir = c.dir
	got, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the docs recipe: %v\n%s", err, got)
	}
	byHand := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(verified|NOT VERIFIED): (\S+)@example.com at (\S+)$`).FindAllStringSubmatch(string(got), -1) {
		byHand[m[2]] = m[1] == "verified"
	}
	for _, n := range names {
		want := n != "rewritten"
		if dlqctl[n] != want || byHand[n] != want {
			t.Errorf("%s: dlqctl valid %v, the docs recipe verified %v; want both %v", n, dlqctl[n], byHand[n], want)
		}
	}
	if len(byHand) != len(names) || len(dlqctl) != len(names) {
		t.Errorf("the recipe checked %d approvals and dlqctl showed %d, of %d:\n%s\n%s", len(byHand), len(dlqctl), len(names), got, out)
	}
	m := readPlanJSON(t, plan)
	for _, a := range m["approvals"].([]any) {
		a := a.(map[string]any)
		if a["principal"] == "zeros@example.com" && !strings.HasSuffix(a["at"].(string), ".000000Z") {
			t.Errorf("approve rewrote a hand-written time: %v", a["at"])
		}
	}
}
