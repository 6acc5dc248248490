package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqctl/dlqctl/backend"
)

// Exit codes (docs/exit-codes.md). This file is the only place that decides them.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitGate        = 3
	ExitCheck       = 4
	ExitApproval    = 5
	ExitPartial     = 6
	ExitBusy        = 7
	ExitInterrupted = 130
)

// exitStatus is what one exit code means.
type exitStatus struct {
	Code    int
	Meaning string
}

// exitStatuses lists every exit code with its meaning, for the man pages'
// EXIT STATUS section. docs/exit-codes.md has the same meanings with
// examples; a test keeps the two equal.
func exitStatuses() []exitStatus {
	return []exitStatus{
		{ExitOK, "success — also when nothing matched"},
		{ExitError, "error: connection, I/O, backend"},
		{ExitUsage, "usage or configuration error"},
		{ExitGate, "a redrive was stopped by a reconciliation gate"},
		{ExitCheck, "check found a threshold breached"},
		{ExitApproval, "approval missing, invalid or expired, or the plan is stale or was changed"},
		{ExitPartial, "partial: some entries could not be moved, the rest were"},
		{ExitBusy, "busy: another run holds this journal or this DLQ; refused at once, nothing changed"},
		{ExitInterrupted, "interrupted (Ctrl-C or SIGTERM, or the DLQ lease was lost)"},
	}
}

// ExitError carries an exit code with its error. Commands return it for
// outcomes that are not plain errors (a breached check, a failed gate).
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// withCode wraps err so that it exits with code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &ExitCodeError{Code: code, Err: err}
}

// usageErrorf is a usage or configuration error (exit 2).
func usageErrorf(format string, args ...any) error {
	return withCode(ExitUsage, fmt.Errorf(format, args...))
}

// exitCode maps an error to its exit code.
func exitCode(err error) int {
	var ec *ExitCodeError
	var ce *backend.ConfigError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ec):
		return ec.Code
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.As(err, &ce):
		return ExitUsage
	case errors.Is(err, backend.ErrBusy):
		return ExitBusy
	}
	return ExitError
}
