package approval

import "fmt"

// Message is the text an approver signs: the plan's digest, the principal
// they sign as, and the approval's time and expiry (Stamp.Text: exactly
// as the approval writes them), one per line. Anyone can rebuild it from
// a plan file and check a signature by hand (docs/approvals.md):
//
//	printf 'dlqctl-approval/v1\nplan %s\nprincipal %s\nat %s\nexpires %s\n' \
//	  "$digest" "$principal" "$at" "$expires_at" |
//	ssh-keygen -Y verify -f allowed_signers -I "$principal" -n dlqctl-approval -s approval.sig
func Message(digest, principal, at, expires string) []byte {
	return fmt.Appendf(nil, "dlqctl-approval/v1\nplan %s\nprincipal %s\nat %s\nexpires %s\n", digest, principal, at, expires)
}
