package ui

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// oneAtATime lets one read at a time reach the source. The browser starts
// reads from several places (the categories scan, a page, a reload of one
// envelope, a plan) and backend.Source does not promise that a backend
// serves them concurrently; a read waiting its turn still ends with its
// context.
type oneAtATime struct {
	backend.Source
	turn chan struct{}
}

func newOneAtATime(src backend.Source) *oneAtATime {
	return &oneAtATime{Source: src, turn: make(chan struct{}, 1)}
}

func (s *oneAtATime) acquire(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *oneAtATime) release() { <-s.turn }

func (s *oneAtATime) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return s.Source.Scan(ctx, after, fn)
}

func (s *oneAtATime) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	if err := s.acquire(ctx); err != nil {
		return envelope.Envelope{}, err
	}
	defer s.release()
	return s.Source.Get(ctx, id)
}

func (s *oneAtATime) Len(ctx context.Context) (int64, error) {
	if err := s.acquire(ctx); err != nil {
		return 0, err
	}
	defer s.release()
	return s.Source.Len(ctx)
}

// hold runs fn (a plan, which reads the source itself) in its turn.
func (s *oneAtATime) hold(ctx context.Context, fn func()) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	fn()
	return nil
}
