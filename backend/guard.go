package backend

import (
	"context"
	"errors"
	"fmt"
)

// DestinationGuard is a Source that knows destinations a redrive must never
// write to: the DLQ itself and the backend's own bookkeeping (state topics,
// lease keys, internal topics). Anyone who can dead-letter a message can
// name its origin, so a plan's destinations are not to be trusted as read.
type DestinationGuard interface {
	// GuardDestination returns nil when dest may receive redriven entries,
	// else an error whose text says why (e.g. `"orders.DLT" is this DLQ`).
	// dest is the destination exactly as a plan records it.
	GuardDestination(ctx context.Context, dest string) error
}

// ErrRefusedDestination marks a destination a DestinationGuard refused.
var ErrRefusedDestination = errors.New("destination refused")

// RefusedDestination wraps a guard's reason so that errors.Is finds
// ErrRefusedDestination and the text names the destination once.
func RefusedDestination(dest string, why error) error {
	return &refusedError{dest: dest, why: why}
}

type refusedError struct {
	dest string
	why  error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("destination %q refused: %v", e.dest, e.why)
}

func (e *refusedError) Is(target error) bool { return target == ErrRefusedDestination }
func (e *refusedError) Unwrap() error        { return e.why }

// Guards checks destinations through a source's guard, once per distinct
// destination: a plan of a million entries names a handful of them. A
// source without a guard allows every destination. A Guards is used by one
// goroutine.
type Guards struct {
	guard DestinationGuard
	seen  map[string]error
}

// NewGuards checks destinations with src's guard, if it has one.
func NewGuards(src any) *Guards {
	g, _ := src.(DestinationGuard)
	return &Guards{guard: g, seen: map[string]error{}}
}

// Check returns nil when dest may receive entries, else an error wrapping
// ErrRefusedDestination. A failure to ask (the server is down) is returned
// as it is and not remembered, so that it is never mistaken for a refusal.
func (g *Guards) Check(ctx context.Context, dest string) error {
	if g == nil || g.guard == nil {
		return nil
	}
	if err, ok := g.seen[dest]; ok {
		return err
	}
	err := g.guard.GuardDestination(ctx, dest)
	if err == nil {
		g.seen[dest] = nil
		return nil
	}
	var unknown *GuardUnavailable
	if errors.As(err, &unknown) {
		return err
	}
	err = RefusedDestination(dest, err)
	g.seen[dest] = err
	return err
}

// GuardUnavailable is a guard's answer when it could not tell (the admin
// API did not answer): the destination is neither allowed nor refused,
// and the command fails rather than guess.
type GuardUnavailable struct{ Err error }

func (e *GuardUnavailable) Error() string { return "check the destination: " + e.Err.Error() }
func (e *GuardUnavailable) Unwrap() error { return e.Err }
