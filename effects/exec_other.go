//go:build !unix

package effects

import "os/exec"

// killGroup leaves exec's default: a cancelled ctx kills sh alone, and
// WaitDelay bounds the wait for whatever it started.
func killGroup(*exec.Cmd) {}
