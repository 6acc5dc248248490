package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/trust"
)

// approveOptions is what approve records and with what: the plan, the
// flags, the approval policy in effect, and the steps it calls out to
// (reading the plan and the approvals beside it, keys and signers, the
// review shown before approving), which a test may give as its own.
type approveOptions struct {
	IO *IOStreams
	// Kind is redrive or resolve; Plan is the plan file.
	Kind string
	Plan string
	// Policy is the config's approval policy; Config names where it
	// comes from, for messages.
	Policy trust.Policy
	Config string
	Now    func() time.Time
	// SSHAuthSock is the ssh-agent socket (SSH_AUTH_SOCK).
	SSHAuthSock string

	// ReadPlan reads a plan of kind, refusing a tampered one.
	ReadPlan func(path, kind string) (*redrive.Plan, error)
	// PlanApprovals adds the approvals handed over beside the plan.
	PlanApprovals func(plan *redrive.Plan, path string) error
	// Identity is the approver: the flag, else the OS user.
	Identity func(flag string) string
	// SigningKey is the HMAC key by signs with.
	SigningKey func(k keyFlags, by string) ([]byte, error)
	// AllowedSigners is the allowed_signers file in effect (nil: none).
	AllowedSigners func(k keyFlags) (*approval.AllowedSigners, error)
	// Review shows the plan and refuses a second approval by one
	// approver whose earlier one is in force (unless again).
	Review func(p *redrive.Plan, path, by string, keys keyFlags, inForce func(redrive.Approval) bool, again bool) error
	// NextStep says what to run once approved.
	NextStep func(ctx context.Context, plan *redrive.Plan, path string, keys keyFlags) string

	by       string
	ttl      time.Duration
	keys     keyFlags
	signWith string
	detach   bool
	distinct bool
	again    bool
}

// newApproveCmd builds `redrive approve` or `resolve approve`; runF, when
// not nil, runs instead of runApprove.
func newApproveCmd(f *Factory, kind string, runF func(context.Context, *approveOptions) error) *cobra.Command {
	o := &approveOptions{Kind: kind}
	c := &cobra.Command{
		Use:   "approve PLAN",
		Short: "Record an approval of the plan: who, when, until when, signed with your SSH key (or the HMAC approval key)",
		Long: `Show the plan, then record an approval of it. With --sign-with KEY the
approval is an SSH signature (the ssh-keygen -Y sign format, namespace
dlqctl-approval) made with your own key: a private key file, or a public key
whose private half ssh-agent holds (SSH_AUTH_SOCK). Apply checks it against an
allowed_signers file, so the host that applies cannot make one. Without
--sign-with the approval is an HMAC with the shared approval key, the weaker
mode for a single operator. --detach writes the approval to PLAN.approval-NAME
beside the plan instead of into it: hand that small file over (or paste it
into a ticket) and apply picks it up.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Plan, o.Policy, o.Config, o.Now = f.IO, args[0], f.config.Policy, f.config.String(), f.Now
			o.SSHAuthSock = f.Getenv("SSH_AUTH_SOCK")
			approvals := approvalSettingsFor(f)
			o.ReadPlan, o.PlanApprovals, o.Identity, o.SigningKey = planFiles{f.Getenv}.readPlanFor, planApprovals, approvals.identity, approvals.signingKey
			o.AllowedSigners, o.Review, o.NextStep = approvals.allowedSigners, planReviewerFor(f).reviewBeforeApproval, runAdviceFor(f).nextAfterApproval
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runApprove(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.by, "by", "", "approver: with --sign-with the principal you sign as (default: the one allowed_signers lists for the key, else the OS user); otherwise a name (default: the OS user)")
	c.Flags().DurationVar(&o.ttl, "ttl", time.Hour, "how long the approval stays valid (at most policy.max_approval_ttl, default 24h)")
	c.Flags().StringVar(&o.signWith, "sign-with", "", "SSH key to sign with: a private key file, or a public key (.pub) whose private half ssh-agent holds")
	c.Flags().BoolVar(&o.detach, "detach", false, "write the approval to PLAN.approval-NAME beside the plan instead of into it")
	o.keys.register(c.Flags())
	c.Flags().BoolVar(&o.distinct, "require-distinct-approver", false, "refuse when the approver is the planner (also policy.distinct_approver)")
	c.Flags().BoolVar(&o.again, "again", false, "record a fresh approval although this approver's earlier one is in force (to go on past a gate)")
	return c
}

// runApprove checks the TTL and the approver against the policy, shows
// the plan, and records the approval in the plan or beside it.
func runApprove(ctx context.Context, o *approveOptions) error {
	path := o.Plan
	maxTTL := trust.MaxTTL(o.Policy)
	if err := approval.CheckTTL(o.ttl, maxTTL); err != nil {
		return usageErrorf("%v", err)
	}
	plan, err := o.ReadPlan(path, o.Kind)
	if err != nil {
		return err
	}
	if err := refuseEmpty(plan, path, "approve"); err != nil {
		return err
	}
	// Approvals handed over beside the plan count for the review (one
	// approver approving twice), but stay in their own files.
	own := len(plan.Approvals)
	if err := o.PlanApprovals(plan, path); err != nil {
		return err
	}
	var sign func(by string) (redrive.Approval, error)
	var by string
	if o.signWith != "" {
		if sign, by, err = sshApproval(plan, path, o); err != nil {
			return err
		}
	} else {
		if rule := trust.HMACRefusedBy(o.Policy); rule != "" {
			return withCode(ExitApproval, fmt.Errorf("%s is set in %s, and an HMAC approval would not count under it: approve with your SSH key, --sign-with KEY", rule, o.Config))
		}
		by = o.Identity(o.by)
		key, err := o.SigningKey(o.keys, by)
		if err != nil {
			return err
		}
		if err := checkApprovalKey(key); err != nil {
			return err
		}
		sign = func(by string) (redrive.Approval, error) { return plan.Approve(key, by, o.Now(), o.ttl) }
		if err := o.Review(plan, path, by, o.keys, func(a redrive.Approval) bool { return plan.InForce(a, key, o.Now()) }, o.again); err != nil {
			return err
		}
	}
	if by == plan.PlannedBy && !trust.PlannerMayApprove(o.Policy, o.distinct) {
		return withCode(ExitApproval, fmt.Errorf("%s planned this and cannot approve it (distinct approver policy)", by))
	}
	a, err := sign(by)
	if err != nil {
		return err
	}
	where := path
	if o.detach {
		if where, err = redrive.WriteDetached(path, plan, a); err != nil {
			return fmt.Errorf("write approval: %w", err)
		}
	} else {
		plan.Approvals = append(plan.Approvals[:own], a)
		if err := redrive.WritePlan(path, plan); err != nil {
			return fmt.Errorf("write plan: %w", err)
		}
	}
	fmt.Fprintf(o.IO.ErrOut, "approved by %s until %s, in %s; %s\n", a.By, a.ExpiresAt.Format(time.RFC3339), where, o.NextStep(ctx, plan, path, o.keys))
	return nil
}

// sshApproval loads the SSH key to sign with and says as whom it signs.
// No private key to sign with is a refused approval (exit 5), not a
// usage error: the approver is not one whom this host can sign for.
func sshApproval(plan *redrive.Plan, path string, o *approveOptions) (func(string) (redrive.Approval, error), string, error) {
	signer, err := approval.LoadSigner(o.signWith, o.SSHAuthSock)
	if errors.Is(err, approval.ErrNoPrivateKey) {
		return nil, "", withCode(ExitApproval, err)
	}
	if err != nil {
		return nil, "", usageErrorf("%v", err)
	}
	signers, err := o.AllowedSigners(o.keys)
	if err != nil {
		signer.Close()
		return nil, "", err
	}
	by := o.by
	if by == "" && signers != nil {
		by = signers.PrincipalOf(signer.PublicKey())
	}
	by = o.Identity(by)
	if signers != nil {
		// Apply would refuse it: say so now, before anything is written.
		if err := signers.Check(signer.PublicKey(), by, approval.Namespace, o.Now()); err != nil {
			signer.Close()
			return nil, "", withCode(ExitApproval, fmt.Errorf("cannot approve as %s: %w", by, err))
		}
	}
	fp := approval.Fingerprint(signer.PublicKey())
	inForce := func(a redrive.Approval) bool {
		return a.Principal == by && a.Key == fp && o.Now().Before(a.ExpiresAt.Time)
	}
	if err := o.Review(plan, path, by, o.keys, inForce, o.again); err != nil {
		signer.Close()
		return nil, "", err
	}
	return func(by string) (redrive.Approval, error) {
		defer signer.Close()
		a, err := plan.ApproveSigned(signer, by, o.Now(), o.ttl)
		if err != nil {
			return a, fmt.Errorf("sign with %s (%s): %w", o.signWith, signer.Via, err)
		}
		return a, nil
	}, by, nil
}
