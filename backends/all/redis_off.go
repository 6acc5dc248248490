//go:build no_redis

package all

import "github.com/dlqctl/dlqctl/backend"

// redis is left out of this build (-tags no_redis).
func redis() (backend.Registration, bool) { return backend.Registration{}, false }
