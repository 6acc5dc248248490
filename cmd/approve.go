package cmd

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/approval"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/trust"
)

type approveOptions struct {
	by       string
	ttl      time.Duration
	keys     keyFlags
	signWith string
	detach   bool
	distinct bool
	again    bool
}

func newApproveCmd(f *Factory, kind string) *cobra.Command {
	o := &approveOptions{}
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
			return runApprove(f, kind, args[0], o)
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

func runApprove(f *Factory, kind, path string, o *approveOptions) error {
	maxTTL := trust.MaxTTL(f.config.Policy)
	if err := approval.CheckTTL(o.ttl, maxTTL); err != nil {
		return usageErrorf("%v", err)
	}
	plan, err := f.readPlanFor(path, kind)
	if err != nil {
		return err
	}
	// Approvals handed over beside the plan count for the review (one
	// approver approving twice), but stay in their own files.
	own := len(plan.Approvals)
	if err := f.planApprovals(plan, path); err != nil {
		return err
	}
	var sign func(by string) (redrive.Approval, error)
	var by string
	if o.signWith != "" {
		if sign, by, err = f.sshApproval(plan, path, o); err != nil {
			return err
		}
	} else {
		if f.config.Policy.SignaturesOnly {
			return withCode(ExitApproval, fmt.Errorf("policy.signatures_only is set in %s: approve with your SSH key, --sign-with KEY", f.config))
		}
		by = f.identity(o.by)
		key, err := f.signingKey(o.keys, by)
		if err != nil {
			return err
		}
		if err := checkApprovalKey(key); err != nil {
			return err
		}
		sign = func(by string) (redrive.Approval, error) { return plan.Approve(key, by, f.Now(), o.ttl) }
		if err := f.reviewBeforeApproval(plan, path, by, o.keys, func(a redrive.Approval) bool { return plan.InForce(a, key, f.Now()) }, o.again); err != nil {
			return err
		}
	}
	if by == plan.PlannedBy && !trust.PlannerMayApprove(f.config.Policy, o.distinct) {
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
	fmt.Fprintf(f.IO.ErrOut, "approved by %s until %s, in %s; %s\n", a.By, a.ExpiresAt.Format(time.RFC3339), where, f.nextAfterApproval(plan, path, o.keys))
	return nil
}

// sshApproval loads the SSH key to sign with and says as whom it signs.
// No private key to sign with is a refused approval (exit 5), not a
// usage error: the approver is not one whom this host can sign for.
func (f *Factory) sshApproval(plan *redrive.Plan, path string, o *approveOptions) (func(string) (redrive.Approval, error), string, error) {
	signer, err := approval.LoadSigner(o.signWith, f.Getenv("SSH_AUTH_SOCK"))
	if errors.Is(err, approval.ErrNoPrivateKey) {
		return nil, "", withCode(ExitApproval, err)
	}
	if err != nil {
		return nil, "", usageErrorf("%v", err)
	}
	signers, err := f.allowedSigners(o.keys)
	if err != nil {
		signer.Close()
		return nil, "", err
	}
	by := o.by
	if by == "" && signers != nil {
		by = signers.PrincipalOf(signer.PublicKey())
	}
	by = f.identity(by)
	if signers != nil {
		// Apply would refuse it: say so now, before anything is written.
		if err := signers.Check(signer.PublicKey(), by, approval.Namespace, f.Now()); err != nil {
			signer.Close()
			return nil, "", withCode(ExitApproval, fmt.Errorf("cannot approve as %s: %w", by, err))
		}
	}
	fp := approval.Fingerprint(signer.PublicKey())
	inForce := func(a redrive.Approval) bool { return a.Principal == by && a.Key == fp && f.Now().Before(a.ExpiresAt) }
	if err := f.reviewBeforeApproval(plan, path, by, o.keys, inForce, o.again); err != nil {
		signer.Close()
		return nil, "", err
	}
	return func(by string) (redrive.Approval, error) {
		defer signer.Close()
		a, err := plan.ApproveSigned(signer, by, f.Now(), o.ttl)
		if err != nil {
			return a, fmt.Errorf("sign with %s (%s): %w", o.signWith, signer.Via, err)
		}
		return a, nil
	}, by, nil
}
