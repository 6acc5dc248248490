//go:build !no_redis

package all

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/redis"
)

func redis() (backend.Registration, bool) { return redisstream.Registration(), true }
