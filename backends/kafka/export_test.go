package kafkadlq

// EmptyWindow plants in t's read-ahead cache a window over offsets
// [from, to) of partition p that holds no record: what a read that went
// idle while the broker restarted leaves behind.
func (t *Topic) EmptyWindow(p int32, from, to int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.windows == nil {
		t.windows = map[int32]*window{}
	}
	t.windows[p] = &window{from: from, to: to}
}
