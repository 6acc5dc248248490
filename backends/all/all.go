// Package all is the list of backends dlqctl is built with. Adding a
// backend means one package that exports Registration and one line here.
package all

import (
	"github.com/dlqctl/dlqctl/backend"
	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/dirqueue"
	"github.com/dlqctl/dlqctl/kafkadlq"
	"github.com/dlqctl/dlqctl/pulsardlq"
	"github.com/dlqctl/dlqctl/redisstream"
	"github.com/dlqctl/dlqctl/sqsdlq"
)

// Registry returns a registry holding every backend, in the order help
// and docs list them.
func Registry() *backend.Registry {
	r := backend.NewRegistry()
	r.Register(dirqueue.Registration())
	r.Register(redisstream.Registration())
	r.Register(pulsardlq.Registration())
	r.Register(kafkadlq.Registration())
	r.Register(sqsdlq.Registration())
	r.Register(natsdlq.Registration())
	return r
}
