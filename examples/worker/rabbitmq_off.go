//go:build no_rabbitmq

package main

// rabbitMode is left out of this build (-tags no_rabbitmq).
func rabbitMode() mode { return mode{} }
