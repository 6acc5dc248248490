//go:build no_pulsar

package main

// pulsarMode is left out of this build (-tags no_pulsar).
func pulsarMode() mode { return mode{} }
