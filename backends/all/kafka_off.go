//go:build no_kafka

package all

import "github.com/dlqctl/dlqctl/backend"

// kafka is left out of this build (-tags no_kafka).
func kafka() (backend.Registration, bool) { return backend.Registration{}, false }
