package cmd

import (
	"bufio"
	"context"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/trust"
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

// approvalSettings are what the approval commands judge and make
// approvals with: the environment behind the key flags, the config's
// policy, who runs this command and the clock.
type approvalSettings struct {
	getenv func(string) string
	policy Policy
	// config names where the policy comes from.
	config   string
	identity func(flag string) string
	now      func() time.Time
}

// approvalSettingsFor are the approval settings of the invocation f.
func approvalSettingsFor(f *Factory) approvalSettings {
	return approvalSettings{getenv: f.Getenv, policy: f.config.Policy, config: f.config.String(), identity: identityFrom(f.Getenv), now: f.Now}
}

// trustKeys are the key flags with the environment behind them.
func (s approvalSettings) trustKeys(k keyFlags) trust.Keys {
	return trust.Keys{
		KeyFile: k.keyFile, KeysDir: k.keysDir, AllowedSigners: k.allowedSigners,
		EnvKey:            s.getenv("DLQCTL_APPROVAL_KEY"),
		EnvKeysDir:        s.getenv("DLQCTL_APPROVAL_KEYS_DIR"),
		EnvAllowedSigners: s.getenv("DLQCTL_ALLOWED_SIGNERS"),
	}
}

// allowedSigners reads the allowed_signers file in effect (nil: none).
func (s approvalSettings) allowedSigners(k keyFlags) (*approval.AllowedSigners, error) {
	as, err := s.trustKeys(k).Signers(s.policy)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return as, nil
}

// approvalPolicy is what apply and resume require (trust.ApprovalPolicy).
func (s approvalSettings) approvalPolicy(k keyFlags, distinct bool) (redrive.ApprovalPolicy, error) {
	pol, err := trust.ApprovalPolicy(trust.Settings{
		Policy: s.policy, Config: s.config, Keys: s.trustKeys(k),
		Distinct: distinct, Applier: s.identity(""), Now: s.now(),
	})
	if err != nil {
		return pol, usageErrorf("%w", err)
	}
	return pol, nil
}

// signingKey is the HMAC key an approval by `by` is made with.
func (s approvalSettings) signingKey(k keyFlags, by string) ([]byte, error) {
	key, err := s.trustKeys(k).SigningKey(by)
	if err != nil {
		return nil, usageErrorf("%w", err)
	}
	return key, nil
}

// approvalKey reads the HMAC key from --key-file or DLQCTL_APPROVAL_KEY.
func (s approvalSettings) approvalKey(keyFile string) ([]byte, error) {
	key, err := s.trustKeys(keyFlags{keyFile: keyFile}).HMACKey()
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return key, nil
}

// planApprovals adds to the plan (in memory) the approvals handed over
// as files beside it (approve --detach).
func planApprovals(plan *redrive.Plan, planPath string) error {
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
func (l commandLines) resumeCommand(kind, journal string, h hintFlags) string {
	parts := []string{"dlqctl"}
	g := l.global
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
// run's own, as its journal recorded it. A password hidden when it was
// recorded comes from the backend's variable when it is opened
// (openSource), or the open says which variable to set.
func journalSource(recorded string) (string, error) {
	return recorded, nil
}
