//go:build !no_kafka

package all

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
)

func kafka() (backend.Registration, bool) { return kafkadlq.Registration(), true }
