//go:build no_kafka

package main

// kafkaMode is left out of this build (-tags no_kafka).
func kafkaMode() mode { return mode{} }
