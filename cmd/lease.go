package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqctl/dlqctl/backend"
)

// refuseWhileLeased is import's guard: it writes into the DLQ, and a run
// that holds the DLQ may already have moved the entries being brought
// back.
func refuseWhileLeased(ctx context.Context, src backend.Source) error {
	lc, ok := src.(backend.LeaseChecker)
	if !ok {
		return nil
	}
	h, err := lc.LeaseHolder(ctx)
	if err != nil {
		return err
	}
	if h != "" {
		return busyOr(&backend.BusyError{What: "DLQ " + src.String(), Holder: h})
	}
	return nil
}

// busyOr gives a busy refusal its exit code and the advice that goes with
// it; other errors pass through.
func busyOr(err error) error {
	var be *backend.BusyError
	if errors.As(err, &be) {
		return withCode(ExitBusy, fmt.Errorf("%w; nothing was changed. Wait for it to end (or, if it is gone, retry once its lease has expired)", err))
	}
	return err
}
