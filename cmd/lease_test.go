package cmd

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestReleaseAfterTheCause: a lease that cannot be given back is said
// after what ended the run, in the same error, and the run's exit code
// stands; after a run that succeeded it is only a note.
func TestReleaseAfterTheCause(t *testing.T) {
	io, _, _, errOut := TestIO()
	f := &Factory{Deps: Deps{IO: io, Now: time.Now, Getenv: func(string) string { return "" }}}
	publish := withCode(ExitError, errors.New("publish E7 to orders: connection refused"))
	release := func() error { return errors.New("redis://h?stream=dlq: release lease: connection refused") }
	err := f.releaseAfter(publish, release)
	msg := err.Error()
	if i, j := strings.Index(msg, "publish E7"), strings.Index(msg, "release lease"); i < 0 || j < i || exitCode(err) != ExitError {
		t.Errorf("error %q (exit %d): want the publish first, then the release, exit %d", msg, exitCode(err), ExitError)
	}
	if errOut.Len() != 0 {
		t.Errorf("printed before the cause: %s", errOut)
	}
	if err := f.releaseAfter(nil, release); err != nil || !strings.Contains(errOut.String(), "note: redis://h?stream=dlq: release lease") {
		t.Errorf("after a good run: %v, stderr %q", err, errOut)
	}
	if err := f.releaseAfter(publish, func() error { return nil }); err != publish {
		t.Errorf("with the lease given back: %v", err)
	}
}
