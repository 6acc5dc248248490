//go:build no_pulsar

package all

import "github.com/dlqctl/dlqctl/backend"

// pulsar is left out of this build (-tags no_pulsar).
func pulsar() (backend.Registration, bool) { return backend.Registration{}, false }
