package crashhook

import "testing"

// TestParse: a step and a count, optionally :stop, make a hook; anything
// else none.
func TestParse(t *testing.T) {
	for spec, ok := range map[string]bool{
		"published:2": true, "intent:1:stop": true,
		"": false, "intent": false, "intent:0": false, "intent:x": false, "intent:1:pause": false, "intent:1:stop:x": false,
	} {
		if got := Parse(spec) != nil; got != ok {
			t.Errorf("Parse(%q) makes a hook: %v, want %v", spec, got, ok)
		}
	}
	// A hook ignores other steps and earlier counts (it would kill the
	// test otherwise).
	h := Parse("intent:3:stop")
	h("published")
	h("intent")
	h("intent")
}
