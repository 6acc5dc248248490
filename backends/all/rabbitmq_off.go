//go:build no_rabbitmq

package all

import "github.com/dlqctl/dlqctl/backend"

// rabbitmq is left out of this build (-tags no_rabbitmq).
func rabbitmq() (backend.Registration, bool) { return backend.Registration{}, false }
