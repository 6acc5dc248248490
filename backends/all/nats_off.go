//go:build no_nats

package all

import "github.com/dlqctl/dlqctl/backend"

// nats is left out of this build (-tags no_nats).
func nats() (backend.Registration, bool) { return backend.Registration{}, false }
