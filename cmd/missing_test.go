package cmd

import (
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
)

type missingSource struct {
	backend.Source
	what string
}

func (m missingSource) MissingDLQ() string { return m.what }

// TestRefuseMissing: the refusal names what the backend says does not
// exist and points at --allow-missing; an existing DLQ, or one read as
// empty on purpose, is not refused.
func TestRefuseMissing(t *testing.T) {
	const what = `kafka://127.0.0.1:9092?topic=typo: topic "typo" does not exist`
	err := refuseMissing(missingSource{what: what}, false, true)
	want := what + "; check the source (--allow-missing reads a missing DLQ as empty on purpose)"
	if err == nil || err.Error() != want {
		t.Fatalf("refuseMissing = %v, want %q", err, want)
	}
	if err := refuseMissing(missingSource{what: what}, true, true); err != nil {
		t.Errorf("with --allow-missing: %v", err)
	}
	if err := refuseMissing(missingSource{}, false, true); err != nil {
		t.Errorf("an existing DLQ: %v", err)
	}
}

// TestCheckOfAMissingStream: through the command line, check and stats on
// a Redis stream that does not exist exit 2 naming the URL and the stream,
// and read it as empty with --allow-missing.
func TestCheckOfAMissingStream(t *testing.T) {
	srv := redistest.Start(t)
	source := srv.URL(0, "orders-dlq-typo")
	for _, args := range [][]string{{"check", "--max-total", "0"}, {"stats"}} {
		_, stderr, code := run(t, nil, append([]string{"--source", source}, args...)...)
		want := source + `: stream "orders-dlq-typo" does not exist; check the source (--allow-missing reads`
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, want 2 and %q in:\n%s", args[0], code, want, stderr)
		}
		if _, stderr, code := run(t, nil, append([]string{"--source", source}, append(args, "--allow-missing")...)...); code != 0 {
			t.Errorf("%s --allow-missing: exit %d: %s", args[0], code, stderr)
		}
	}
}

// TestCheckOfAMissingFolder: a queue folder without its error/ folder is
// refused when opened, naming the folder, and reads as empty with
// --allow-missing.
func TestCheckOfAMissingFolder(t *testing.T) {
	root := t.TempDir()
	_, stderr, code := run(t, nil, "--source", "dir:"+root, "check", "--max-total", "0")
	if code != 2 || !strings.Contains(stderr, "dir:"+root+": the queue does not exist") {
		t.Errorf("check: exit %d, want 2 naming the queue:\n%s", code, stderr)
	}
	if _, stderr, code := run(t, nil, "--source", "dir:"+root, "check", "--max-total", "0", "--allow-missing"); code != 0 {
		t.Errorf("check --allow-missing: exit %d: %s", code, stderr)
	}
}
