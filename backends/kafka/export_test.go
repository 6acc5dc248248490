package kafkadlq

import "context"

// EmptyWindow plants in t's read-ahead cache a window over offsets
// [from, to) of partition p that holds no record: what a read that went
// idle while the broker restarted hands its own caller (and once left in
// the cache for later reads too).
func (t *Topic) EmptyWindow(p int32, from, to int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.windows == nil {
		t.windows = map[int32]*window{}
	}
	t.windows[p] = &window{from: from, to: to}
}

// ReadWindow reads partition p's offsets [from, to) as a point read does,
// with lso as its last stable offset, and returns the window the read
// left in t's read-ahead cache.
func (t *Topic) ReadWindow(ctx context.Context, p int32, from, to, lso int64) (cachedFrom, cachedTo int64, err error) {
	if _, err := t.readWindows(ctx, map[int32][3]int64{p: {from, to, lso}}); err != nil {
		return 0, 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.windows[p]
	return w.from, w.to, nil
}
