//go:build no_sqs

package main

// sqsMode is left out of this build (-tags no_sqs).
func sqsMode() mode { return mode{} }
