// Package all is the list of backends dlqctl is built with. Adding a
// backend means one package that exports Registration and its two files
// here: NAME.go, built unless the tag no_NAME is set, and NAME_off.go, the
// same function returning false under that tag.
package all

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/dir"
)

// Registry returns a registry holding every backend of this build, in
// the order help and docs list them.
func Registry() *backend.Registry {
	r := backend.NewRegistry()
	for _, reg := range []func() (backend.Registration, bool){dir, redis, pulsar, kafka, sqs, rabbitmq, nats} {
		if b, ok := reg(); ok {
			r.Register(b)
		}
	}
	return r
}

// dir is the embedded default (the sample incident and the README's first
// command read it), so no tag leaves it out.
func dir() (backend.Registration, bool) { return dirqueue.Registration(), true }
