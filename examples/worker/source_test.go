package main

import (
	"strings"
	"testing"
)

// TestModes: every mode's prefixes lead back to it, no prefix is taken by
// two modes, and the help and the errors that list the modes name each
// one, so a mode added to modes() is documented by that line alone.
func TestModes(t *testing.T) {
	owner := map[string]string{}
	for _, m := range modes() {
		if len(m.prefixes) == 0 || m.usage == "" || m.help == "" || m.open == nil {
			t.Errorf("mode %q: prefixes, usage, help and open are all required", m.usage)
			continue
		}
		for _, p := range m.prefixes {
			if o, ok := owner[p]; ok {
				t.Errorf("prefix %q is taken by %q and %q", p, o, m.usage)
			}
			owner[p] = m.usage
			if got, ok := modeOf(p + "x"); !ok || got.usage != m.usage {
				t.Errorf("modeOf(%q) = %q, %v; want %q", p+"x", got.usage, ok, m.usage)
			}
		}
	}
	if _, ok := modeOf("ftp://x"); ok {
		t.Error("modeOf(ftp://x) found a mode")
	}

	help := runWorker(t, "--help").stderr
	required := runWorker(t, "--inbox", "sqlite:x.db").stderr
	unknown := runWorker(t, "--source", "ftp://x", "--inbox", "sqlite:"+t.TempDir()+"/x.db").stderr
	for _, m := range modes() {
		if !strings.Contains(help, m.help) {
			t.Errorf("--help does not name %s:\n%s", m.help, help)
		}
		if !strings.Contains(required, m.short()) {
			t.Errorf("the missing --source error does not name %s: %s", m.short(), required)
		}
		if !strings.Contains(unknown, m.usage) {
			t.Errorf("the unknown --source error does not name %s: %s", m.usage, unknown)
		}
	}
	create := runWorker(t, "--source", "dir:x", "--create").stderr
	for _, m := range modes() {
		if named := strings.Contains(create, m.prefixes[0]); named != (m.create != nil) {
			t.Errorf("--create error names %s: %v, want %v (has create: %v): %s", m.prefixes[0], named, m.create != nil, m.create != nil, create)
		}
	}
}
