package approval

import (
	"fmt"
	"time"
)

// Message is the text an approver signs: the plan's digest, the principal
// they sign as, and the approval's time and expiry, one per line, times in
// RFC 3339 UTC with nanoseconds as the plan file records them. Anyone can
// rebuild it from a plan file and check a signature by hand:
//
//	printf 'dlqctl-approval/v1\nplan %s\nprincipal %s\nat %s\nexpires %s\n' \
//	  "$digest" "$principal" "$at" "$expires_at" |
//	ssh-keygen -Y verify -f allowed_signers -I "$principal" -n dlqctl-approval -s approval.sig
func Message(digest, principal string, at, expires time.Time) []byte {
	return fmt.Appendf(nil, "dlqctl-approval/v1\nplan %s\nprincipal %s\nat %s\nexpires %s\n",
		digest, principal, at.UTC().Format(time.RFC3339Nano), expires.UTC().Format(time.RFC3339Nano))
}
