package cmd

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportOutIsTheStdoutExport: --out holds exactly what stdout gets,
// replaces an older file whole, is mode 0600 and leaves no temporary file.
func TestExportOutIsTheStdoutExport(t *testing.T) {
	stdout, stderr, code := run(t, nil, "--source", incidentSource(t), "export")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "incident.ndjson")
	if err := os.WriteFile(dump, []byte("old backup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, nil, "--source", incidentSource(t), "export", "--out", dump); code != 0 {
		t.Fatalf("export --out: exit %d: %s", code, stderr)
	} else if !strings.Contains(stderr, "to "+dump) {
		t.Errorf("stderr does not name the file: %s", stderr)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != stdout {
		t.Errorf("--out differs from stdout: %d bytes, want %d", len(b), len(stdout))
	}
	if fi, err := os.Stat(dump); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestExportOutIntoMissingFolder: the file error is named as the export's.
func TestExportOutIntoMissingFolder(t *testing.T) {
	dump := filepath.Join(t.TempDir(), "no-such-dir", "x.ndjson")
	_, stderr, code := run(t, nil, "--source", incidentSource(t), "export", "--out", dump)
	if code == 0 || !strings.Contains(stderr, "export:") || !strings.Contains(stderr, "no-such-dir") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// TestExportToKeepsTheOldFileWhenReadingFails: a read error mid-export is
// returned as it is and the previous file stays whole.
func TestExportToKeepsTheOldFileWhenReadingFails(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "backup.ndjson")
	if err := os.WriteFile(dump, []byte("old backup\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("stream vanished")
	err := exportTo(io.Discard, dump, func(w io.Writer) error {
		if _, err := w.Write(bytes.Repeat([]byte("x"), 10000)); err != nil {
			return err
		}
		return broken
	})
	if err != broken {
		t.Fatalf("err %v, want %v unwrapped", err, broken)
	}
	if b, _ := os.ReadFile(dump); string(b) != "old backup\n" {
		t.Errorf("old file changed: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
