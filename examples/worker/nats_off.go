//go:build no_nats

package main

// natsMode is left out of this build (-tags no_nats).
func natsMode() mode { return mode{} }
