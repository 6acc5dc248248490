package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redrive"
)

// keyFlags say what approvals are made and checked with: an SSH key
// (--sign-with, approve only) checked against an allowed_signers file
// (--allowed-signers, DLQCTL_ALLOWED_SIGNERS or policy.allowed_signers),
// or the weaker HMAC: one key for everyone (--key-file or
// DLQCTL_APPROVAL_KEY), or a folder with a key per approver (--keys-dir or
// DLQCTL_APPROVAL_KEYS_DIR, file APPROVER.key).
type keyFlags struct {
	keyFile        string
	keysDir        string
	allowedSigners string
}

func (k *keyFlags) register(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&k.allowedSigners, "allowed-signers", "", "ssh-keygen allowed_signers file that SSH-signed approvals verify against (default: DLQCTL_ALLOWED_SIGNERS, then policy.allowed_signers)")
	fs.StringVar(&k.keyFile, "key-file", "", "file with the HMAC approval key (default: DLQCTL_APPROVAL_KEY)")
	fs.StringVar(&k.keysDir, "keys-dir", "", "folder with one HMAC key per approver, APPROVER.key: an approval verifies only with its approver's key (default: DLQCTL_APPROVAL_KEYS_DIR)")
}

// approverName is what may name a key file in a keys folder.
var approverName = regexp.MustCompile(`^[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*$`)

func (f *Factory) keysDir(k keyFlags) string {
	return firstNonEmpty(k.keysDir, f.Getenv("DLQCTL_APPROVAL_KEYS_DIR"))
}

// approverKey reads DIR/APPROVER.key.
func approverKey(dir, by string) ([]byte, error) {
	if !approverName.MatchString(by) {
		return nil, fmt.Errorf("approver %q cannot name a key file in %s (letters, digits and ._@+- only)", by, dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, by+".key"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no key for approver %s in %s (want %s.key)", by, dir, by)
	}
	if err != nil {
		return nil, err
	}
	key := []byte(strings.TrimRight(string(b), "\r\n"))
	if err := approval.CheckHMACKey(key); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, by+".key"), err)
	}
	return key, nil
}

// allowedSigners reads the allowed_signers file in effect (nil: none).
func (f *Factory) allowedSigners(k keyFlags) (*approval.AllowedSigners, error) {
	path := firstNonEmpty(k.allowedSigners, f.Getenv("DLQCTL_ALLOWED_SIGNERS"), f.config.Policy.AllowedSigners)
	if path == "" {
		return nil, nil
	}
	as, err := approval.ReadAllowedSigners(path)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return as, nil
}

// approvalPolicy is what apply and resume require: the allowed signers
// and HMAC key (or keys) to verify with, how many approvers, and the
// distinct-approver rule.
func (f *Factory) approvalPolicy(k keyFlags, distinct bool) (redrive.ApprovalPolicy, error) {
	pp := f.config.Policy
	pol := redrive.ApprovalPolicy{
		DistinctApprover: distinct || pp.DistinctApprover, Required: pp.ApprovalsRequired,
		SignaturesOnly: pp.SignaturesOnly, Applier: f.identity(""),
		// Approval times keep their fraction of a second; so does the
		// clock they are compared with.
		Now: f.Now().UTC(),
	}
	if pp.ApprovalsRequired < 0 {
		return pol, usageErrorf("policy.approvals_required is %d in %s; it is a count of approvers", pp.ApprovalsRequired, f.config)
	}
	var err error
	if pol.Signers, err = f.allowedSigners(k); err != nil {
		return pol, err
	}
	if dir := f.keysDir(k); dir != "" {
		if k.keyFile != "" {
			return pol, usageErrorf("give --key-file or --keys-dir, not both")
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return pol, usageErrorf("keys folder %s: not a folder", dir)
		}
		pol.KeyFor = func(by string) ([]byte, error) { return approverKey(dir, by) }
		return pol, nil
	}
	key, err := f.approvalKey(k.keyFile)
	if err != nil {
		return pol, err
	}
	if len(key) > 0 {
		if err := checkApprovalKey(key); err != nil {
			return pol, err
		}
	}
	pol.Key = key
	return pol, nil
}

// approvalRequired names the policy rule that forbids a run without an
// approval ("" when none does): a policy that asks for signatures or for
// several approvers asks for an approval first.
func (f *Factory) approvalRequired() string {
	switch pp := f.config.Policy; {
	case pp.RequireApproval:
		return "policy.require_approval"
	case pp.SignaturesOnly:
		return "policy.signatures_only"
	case pp.ApprovalsRequired > 1:
		return "policy.approvals_required"
	}
	return ""
}

// signingKey is the HMAC key an approval by `by` is made with.
func (f *Factory) signingKey(k keyFlags, by string) ([]byte, error) {
	if dir := f.keysDir(k); dir != "" && k.keyFile == "" {
		key, err := approverKey(dir, by)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		return key, nil
	}
	return f.approvalKey(k.keyFile)
}

// planApprovals adds to the plan (in memory) the approvals handed over
// as files beside it (approve --detach).
func (f *Factory) planApprovals(plan *redrive.Plan, planPath string) error {
	found, err := redrive.ReadDetached(planPath)
	if err != nil {
		return withCode(ExitApproval, err)
	}
	for _, d := range found {
		plan.Approvals = append(plan.Approvals, d.Approval)
	}
	return nil
}

// readAnswer reads one line from in, or gives up at once when ctx ends
// (Ctrl-C at the prompt): the read goes on in a goroutine that the exit
// abandons.
func readAnswer(ctx context.Context, in io.Reader) (string, error) {
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case s := <-got:
		return s, nil
	}
}

// hintFlags are what a printed resume command must carry so that it runs
// as printed in a fresh shell.
type hintFlags struct {
	keys     keyFlags
	pastGate bool
	// yes: the run has neither an approval nor a signed journal, so its
	// resume asks for "yes" as the one-step command did.
	yes bool
}

// resumeCommand is the command that continues the run in journal.
func (f *Factory) resumeCommand(kind, journal string, h hintFlags) string {
	parts := []string{"dlqctl"}
	g := f.Global
	if g.ConfigPath != "" {
		parts = append(parts, "--config", shellQuote(g.ConfigPath))
	}
	if g.Profile != "" {
		parts = append(parts, "--profile", shellQuote(g.Profile))
	}
	if g.EventIDFrom != "" {
		parts = append(parts, "--event-id-from", shellQuote(g.EventIDFrom))
	}
	if g.KeyFrom != "" {
		parts = append(parts, "--key-from", shellQuote(g.KeyFrom))
	}
	parts = append(parts, kind, "resume", shellQuote(journal))
	if h.pastGate {
		parts = append(parts, "--past-gate")
	}
	if h.yes {
		parts = append(parts, "--yes")
	}
	if h.keys.keyFile != "" {
		parts = append(parts, "--key-file", shellQuote(h.keys.keyFile))
	}
	if h.keys.keysDir != "" {
		parts = append(parts, "--keys-dir", shellQuote(h.keys.keysDir))
	}
	if h.keys.allowedSigners != "" {
		parts = append(parts, "--allowed-signers", shellQuote(h.keys.allowedSigners))
	}
	return strings.Join(parts, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// journalSource is the source a resume runs on when none is given: the
// run's own, as its journal recorded it. A URL whose password was hidden
// when it was recorded cannot be used as it is.
func journalSource(recorded string) (string, error) {
	if strings.Contains(recorded, backend.Redacted) {
		return "", usageErrorf("the run was on %s, whose password the journal does not keep: give --source with it, or set the backend's password variable and give --source without it", recorded)
	}
	return recorded, nil
}

// secretsNote says what a printed resume command cannot carry: a password
// that the plan or journal recorded hidden.
func secretsNote(p *redrive.Plan) string {
	var need []string
	if strings.Contains(p.Source, backend.Redacted) {
		need = append(need, "--source with its password (or the backend's password variable)")
	}
	if strings.Contains(p.Params.Effects, backend.Redacted) {
		need = append(need, "--effects with its password (or DLQCTL_EFFECTS_PASSWORD)")
	}
	if len(need) == 0 {
		return ""
	}
	return " (add " + strings.Join(need, " and ") + ": the journal does not keep passwords)"
}
