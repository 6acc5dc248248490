// Package trust holds the rules that decide which approvals count and
// with which keys: which allowed_signers file and HMAC key (or keys
// folder) are in effect, which key an approver signs with, what a policy
// asks of a run before it may move anything, and whether a run without an
// approval may go on. It works on plain values (flag values, environment
// values, the config's policy, a time) so that every rule is tested here;
// the commands only gather those values and print what is decided.
//
// Every error it returns is a usage or configuration error (what was
// given is wrong as written), but for GoOn's, which are refusals to go on
// (*NotApproved: exit 5).
package trust

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/redrive"
)

// Policy holds the rules that redrive and resolve enforce (the config
// file's policy section).
type Policy struct {
	RequireApproval  bool `yaml:"require_approval"`
	DistinctApprover bool `yaml:"distinct_approver"`
	// AllowedSigners is the ssh-keygen allowed_signers file that SSH-signed
	// approvals verify against.
	AllowedSigners string `yaml:"allowed_signers"`
	// ApprovalsRequired is how many approvals by distinct approvers a plan
	// needs (0 means 1).
	ApprovalsRequired int `yaml:"approvals_required"`
	// SignaturesOnly refuses HMAC approvals.
	SignaturesOnly bool `yaml:"signatures_only"`
	// MaxApprovalTTL caps --ttl (default 24h).
	MaxApprovalTTL time.Duration `yaml:"max_approval_ttl"`
}

// Keys are where approval keys and signers come from in one invocation:
// the flags as given, then the environment.
type Keys struct {
	// KeyFile is --key-file: a file with the one HMAC key for everyone.
	KeyFile string
	// KeysDir is --keys-dir: a folder with one HMAC key per approver.
	KeysDir string
	// AllowedSigners is --allowed-signers.
	AllowedSigners string

	// EnvKey is DLQCTL_APPROVAL_KEY.
	EnvKey string
	// EnvKeysDir is DLQCTL_APPROVAL_KEYS_DIR.
	EnvKeysDir string
	// EnvAllowedSigners is DLQCTL_ALLOWED_SIGNERS.
	EnvAllowedSigners string
}

// Dir is the keys folder in effect ("" when none is).
func (k Keys) Dir() string {
	return cmp.Or(k.KeysDir, k.EnvKeysDir)
}

// SignersPath is the allowed_signers file in effect: the flag, then the
// environment, then the policy ("" when none is).
func (k Keys) SignersPath(p Policy) string {
	return cmp.Or(k.AllowedSigners, k.EnvAllowedSigners, p.AllowedSigners)
}

// Signers reads the allowed_signers file in effect (nil: none is).
func (k Keys) Signers(p Policy) (*approval.AllowedSigners, error) {
	path := k.SignersPath(p)
	if path == "" {
		return nil, nil
	}
	return approval.ReadAllowedSigners(path)
}

// HMACKey is the one HMAC key in effect: the file --key-file names, else
// DLQCTL_APPROVAL_KEY (nil when neither is set). A file's key may end in
// a line break, which is not part of it.
func (k Keys) HMACKey() ([]byte, error) {
	if k.KeyFile != "" {
		b, err := os.ReadFile(k.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--key-file: %v", err)
		}
		return []byte(strings.TrimRight(string(b), "\r\n")), nil
	}
	if k.EnvKey != "" {
		return []byte(k.EnvKey), nil
	}
	return nil, nil
}

// SigningKey is the HMAC key an approval by `by` is made with: by's own
// key in the keys folder, unless --key-file overrides the folder, else
// the one key in effect.
func (k Keys) SigningKey(by string) ([]byte, error) {
	if dir := k.Dir(); dir != "" && k.KeyFile == "" {
		return ApproverKey(dir, by)
	}
	return k.HMACKey()
}

// approverName is what may name a key file in a keys folder: nothing
// that leaves the folder or hides as a dot file.
var approverName = regexp.MustCompile(`^[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*$`)

// ApproverKey reads DIR/APPROVER.key, and refuses a weak key there as it
// would one given directly.
func ApproverKey(dir, by string) ([]byte, error) {
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

// CheckKey refuses a missing, short or patterned HMAC key, saying how to
// make one.
func CheckKey(key []byte) error {
	if len(key) == 0 {
		return errors.New("no approval key: sign with your SSH key (--sign-with KEY), or set DLQCTL_APPROVAL_KEY or give --key-file (make one with: openssl rand -hex 32)")
	}
	if err := approval.CheckHMACKey(key); err != nil {
		return fmt.Errorf("%w (make one with: openssl rand -hex 32)", err)
	}
	return nil
}

// Settings are what one apply, resume or review is checked under.
type Settings struct {
	Policy Policy
	// Config names where Policy was read, for errors ("config
	// dlqctl.yaml", "(no config file)").
	Config string
	Keys   Keys
	// Distinct is --require-distinct-approver: neither the planner nor the
	// applier may approve, whatever the policy says.
	Distinct bool
	// Applier is who runs the plan.
	Applier string
	// Now is when the approvals are checked.
	Now time.Time
}

// ApprovalPolicy is what apply and resume require: the allowed signers and
// HMAC key (or keys) to verify with, how many approvers, and the
// distinct-approver rule.
func ApprovalPolicy(s Settings) (redrive.ApprovalPolicy, error) {
	pp := s.Policy
	pol := redrive.ApprovalPolicy{
		DistinctApprover: s.Distinct || pp.DistinctApprover, Required: pp.ApprovalsRequired,
		SignaturesOnly: pp.SignaturesOnly, Applier: s.Applier, MaxTTL: MaxTTL(pp),
		// Approval times keep their fraction of a second; so does the
		// clock they are compared with.
		Now: s.Now.UTC(),
	}
	if pp.ApprovalsRequired < 0 {
		return pol, fmt.Errorf("policy.approvals_required is %d in %s; it is a count of approvers", pp.ApprovalsRequired, s.Config)
	}
	var err error
	if pol.Signers, err = s.Keys.Signers(pp); err != nil {
		return pol, err
	}
	if dir := s.Keys.Dir(); dir != "" {
		if s.Keys.KeyFile != "" {
			return pol, errors.New("give --key-file or --keys-dir, not both")
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return pol, fmt.Errorf("keys folder %s: not a folder", dir)
		}
		pol.KeyFor = func(by string) ([]byte, error) { return ApproverKey(dir, by) }
		return pol, nil
	}
	key, err := s.Keys.HMACKey()
	if err != nil {
		return pol, err
	}
	if len(key) > 0 {
		if err := CheckKey(key); err != nil {
			return pol, err
		}
	}
	pol.Key = key
	return pol, nil
}

// RequiredBy names the policy rule that forbids a run without an approval
// ("" when none does): a policy that asks for signatures or for several
// approvers asks for an approval first.
func RequiredBy(p Policy) string {
	switch {
	case p.RequireApproval:
		return "policy.require_approval"
	case p.SignaturesOnly:
		return "policy.signatures_only"
	case p.ApprovalsRequired > 1:
		return "policy.approvals_required"
	}
	return ""
}

// HMACRefusedBy names the policy rule under which an HMAC approval never
// counts ("" when one can): policy.signatures_only refuses them, and
// toward policy.approvals_required of two or more only SSH signatures
// count, since whoever holds the HMAC key can make one under any name.
func HMACRefusedBy(p Policy) string {
	switch {
	case p.SignaturesOnly:
		return "policy.signatures_only"
	case p.ApprovalsRequired > 1:
		return "policy.approvals_required"
	}
	return ""
}

// MaxTTL is the longest an approval may last under p: the policy's cap,
// else approval.DefaultMaxTTL.
func MaxTTL(p Policy) time.Duration {
	return cmp.Or(p.MaxApprovalTTL, approval.DefaultMaxTTL)
}

// PlannerMayApprove says whether whoever planned a change may approve it:
// not under the distinct-approver rule, which the flag (distinct) or the
// policy sets.
func PlannerMayApprove(p Policy, distinct bool) bool {
	return !distinct && !p.DistinctApprover
}

// GoingOn is how a resumed run may go on.
type GoingOn int

const (
	// UnderApprovals: only under approvals that verify now (after a
	// gate's halt, approvals given since).
	UnderApprovals GoingOn = iota
	// Refused: the run started without an approval, and the policy
	// (RequiredBy names the rule) now asks for one.
	Refused
	// AskYes: a one-step run whose journal is not signed (no approval key
	// was in effect): the resume asks for "yes" as the one-step command
	// did.
	AskYes
	// AsStarted: a one-step run whose journal is signed with the approval
	// key in effect: it goes on as it started.
	AsStarted
)

// HowGoingOn decides how a resumed run may go on, from the policy, the
// number of approvals its run-start records, whether a gate halted it, and
// whether its journal is signed. Going on past a gate always takes an
// approval given after the halt, even for a run that started without one.
func HowGoingOn(p Policy, approvals int, halted, signed bool) GoingOn {
	switch {
	case approvals > 0 || halted:
		return UnderApprovals
	case RequiredBy(p) != "":
		return Refused
	case !signed:
		return AskYes
	}
	return AsStarted
}
