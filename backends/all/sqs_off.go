//go:build no_sqs

package all

import "github.com/dlqctl/dlqctl/backend"

// sqs is left out of this build (-tags no_sqs).
func sqs() (backend.Registration, bool) { return backend.Registration{}, false }
