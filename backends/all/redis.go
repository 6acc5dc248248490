//go:build !no_redis

package all

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redisstream"
)

func redis() (backend.Registration, bool) { return redisstream.Registration(), true }
