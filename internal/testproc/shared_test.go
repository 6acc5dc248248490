package testproc

import (
	"errors"
	"strings"
	"testing"
)

type fakeServer struct {
	stops   int
	stopErr error
}

func (f *fakeServer) Stop() error        { f.stops++; return f.stopErr }
func (f *fakeServer) LogTail(int) string { return "the last lines" }

// TestSharedStartsOnceAndFinishStops: the first Get starts the server, the
// next ones reuse it, and Finish stops it once, turning a failed stop into
// a failed run and writing the log tail when the tests failed.
func TestSharedStartsOnceAndFinishStops(t *testing.T) {
	if testing.Short() {
		// Get skips under -short by design: what that looks like is the
		// skip message of every server test in that tier.
		t.Skip("Shared.Get skips under -short")
	}
	srv := &fakeServer{stopErr: errors.New("stop failed")}
	starts := 0
	s := &Shared[*fakeServer]{Server: "a fake server", Start: func() (*fakeServer, error) { starts++; return srv, nil }}
	if got := s.Finish(0, &strings.Builder{}); got != 0 || srv.stops != 0 {
		t.Fatalf("Finish before any Get: code %d, %d stops; want 0, 0", got, srv.stops)
	}
	if s.Get(t) != srv || s.Get(t) != srv || starts != 1 {
		t.Fatalf("two Gets started the server %d times, want 1", starts)
	}
	var w strings.Builder
	if got := s.Finish(3, &w); got != 3 || srv.stops != 1 || !strings.Contains(w.String(), "the last lines") {
		t.Fatalf("Finish(3): code %d, %d stops, output %q", got, srv.stops, w.String())
	}
	if got := s.Finish(0, &w); got != 1 || !strings.Contains(w.String(), "stop failed") {
		t.Fatalf("Finish(0) with a failing stop: code %d, output %q; want 1 naming the error", got, w.String())
	}
}

func TestRequireNamesMissingKeys(t *testing.T) {
	s := &JavaServer{Name: "the X server"}
	if err := s.Require(map[string]string{"A": "1", "B": "2"}, "A", "B"); err != nil {
		t.Fatal(err)
	}
	err := s.Require(map[string]string{"A": "1", "C": ""}, "A", "B", "C")
	if err == nil || !strings.Contains(err.Error(), "B, C") || !strings.Contains(err.Error(), "the X server") {
		t.Fatalf("err = %v, want one naming B, C and the server", err)
	}
}
