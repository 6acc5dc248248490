//go:build !no_pulsar

package all

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/pulsar"
)

func pulsar() (backend.Registration, bool) { return pulsardlq.Registration(), true }
