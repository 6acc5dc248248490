//go:build !no_rabbitmq

package all

import (
	"github.com/dlqctl/dlqctl/backend"
	amqpdlq "github.com/dlqctl/dlqctl/backends/rabbitmq"
)

func rabbitmq() (backend.Registration, bool) { return amqpdlq.Registration(), true }
