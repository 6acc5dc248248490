package pulsardlq

import "context"

// RecordedRemovals is how many DLQ entries dlqctl's removal record holds
// as t reads it (for tests: what a new process would trust).
func RecordedRemovals(ctx context.Context, t *Topic) (int, error) {
	if err := t.loadRemovals(ctx); err != nil {
		return 0, err
	}
	t.removed.mu.Lock()
	defer t.removed.mu.Unlock()
	n := 0
	for _, m := range t.removed.at {
		n += len(m)
	}
	return n, nil
}
