//go:build !no_nats

package all

import (
	"github.com/dlqctl/dlqctl/backend"
	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
)

func nats() (backend.Registration, bool) { return natsdlq.Registration(), true }
