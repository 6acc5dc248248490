//go:build !no_sqs

package all

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/sqs"
)

func sqs() (backend.Registration, bool) { return sqsdlq.Registration(), true }
