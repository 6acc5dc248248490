package main

import (
	"errors"
	"io"
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

// TestSourceErrorsShowNoQueryValue: a --source URL that the worker
// refuses is refused with an error that names the key at fault and shows
// no value of its query (one typed under a mistyped key may be a secret)
// and no password, in every mode.
func TestSourceErrorsShowNoQueryValue(t *testing.T) {
	const mark = "Q7xZsecret"
	for _, raw := range []string{
		"redis://127.0.0.1:1/0?stream=s&group=g&passwrod=" + mark,
		"redis://127.0.0.1:1/0?stream=s&group=g&bogus=" + mark + "%zz",
		"redis://127.0.0.1:1/0?stream=s&group=g&bogus=x@" + mark,
		"kafka://127.0.0.1:1?topic=t&group=g&passwrod=" + mark,
		"nats://127.0.0.1:1?stream=s&consumer=c&passwrod=" + mark,
		"nats://127.0.0.1:1?stream=s&consumer=c&deadletter=" + mark,
		"pulsar://127.0.0.1:1?topic=t&subscription=s&passwrod=" + mark,
		"pulsar://127.0.0.1:1?topic=a/b/c/" + mark + "&subscription=s",
		"amqp://u:" + mark + "@127.0.0.1:1/?queue=q&passwrod=" + mark,
		"amqp://127.0.0.1:1/?queue=q&requeue=" + mark,
		"amqp://u:" + mark + "@[bad/?queue=q",
		"sqs://q?region=r&passwrod=" + mark,
		"ftp://h/?passwrod=" + mark,
	} {
		_, err := openSource(t.Context(), Options{Source: raw}, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), mark) {
			t.Errorf("%s: %v; want a usage error without %s", raw, err, mark)
		}
	}
}
