package main

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// The crash matrix and the restart mid-apply run for every backend in the
// conformance suite (conformance.Run, called by backends/NAME/conformance_test.go).

// dlqctlProc runs the real command (the test binary, through testscript's
// PATH entry) and returns its exit code and output.
func dlqctlProc(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	return runProc(t, exec.Command("dlqctl", args...), dir, env)
}

// runProc is dlqctlProc for a command made by the caller (to start it in
// another PID namespace, say).
func runProc(t *testing.T, c *exec.Cmd, dir string, env []string) (int, string) {
	t.Helper()
	c.Dir = dir
	c.Env = append(os.Environ(), append([]string{"DLQCTL_TEST_NOW=", "DLQCTL_APPROVAL_KEY=test-approval-key-0123456789abcdef"}, env...)...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if code == -1 {
			code = 137 // killed by a signal
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}
