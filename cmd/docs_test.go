package cmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/redrive"
)

// TestCommandReferenceIsCurrent regenerates docs/commands and compares it
// with the committed pages, so that the reference never drifts from the
// flags. Regenerate with: go run . docs markdown
func TestCommandReferenceIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := run(t, nil, "docs", "markdown", "--dir", dir); code != 0 {
		t.Fatalf("docs markdown: exit %d: %s", code, errOut)
	}
	generated, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no pages generated: %v", err)
	}
	committed, _ := filepath.Glob("../docs/commands/*.md")
	if len(committed) != len(generated) {
		t.Errorf("docs/commands has %d pages, the commands make %d: run go run . docs markdown", len(committed), len(generated))
	}
	for _, g := range generated {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Join("../docs/commands", filepath.Base(g)))
		if err != nil || string(got) != string(want) {
			t.Errorf("docs/commands/%s is out of date: run go run . docs markdown", filepath.Base(g))
		}
	}
}

// TestManPages: --dir is created when missing, and every page says what
// each exit code means, before SEE ALSO.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "share", "man1")
	if _, errOut, code := run(t, nil, "docs", "man", "--dir", dir); code != 0 {
		t.Fatalf("docs man: exit %d: %s", code, errOut)
	}
	for _, page := range []string{"dlqctl.1", "dlqctl-stats.1", "dlqctl-redrive-apply.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("no man page %s: %v", page, err)
			continue
		}
		text := string(b)
		exit, also := strings.Index(text, ".SH EXIT STATUS\n"), strings.Index(text, ".SH SEE ALSO")
		if exit < 0 || also < exit {
			t.Errorf("%s: no EXIT STATUS section before SEE ALSO", page)
			continue
		}
		for _, want := range []string{".B 2\nusage or configuration error\n", ".B 130\ninterrupted (Ctrl-C"} {
			if !strings.Contains(text[exit:also], want) {
				t.Errorf("%s: EXIT STATUS lacks %q", page, want)
			}
		}
	}
}

// TestExitStatusesMatchTheDocs keeps the man pages' meanings (from
// exitStatuses) equal to the table of docs/exit-codes.md.
func TestExitStatusesMatchTheDocs(t *testing.T) {
	b, err := os.ReadFile("../docs/exit-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		documented[strings.TrimSpace(cells[1])] = strings.ReplaceAll(strings.TrimSpace(cells[2]), "`", "")
	}
	statuses := exitStatuses()
	for _, s := range statuses {
		if got := documented[strconv.Itoa(s.Code)]; got != s.Meaning {
			t.Errorf("exit %d: docs/exit-codes.md says %q, the man pages %q", s.Code, got, s.Meaning)
		}
	}
	if n := len(documented) - 2; n != len(statuses) { // less the header and its rule
		t.Errorf("docs/exit-codes.md has %d codes, exitStatuses %d", n, len(statuses))
	}
}

// TestBackendsPageIsCurrent keeps docs/backends.md equal to the registry.
// Regenerate with: go run . docs backends > docs/backends.md
func TestBackendsPageIsCurrent(t *testing.T) {
	out, errOut, code := run(t, nil, "docs", "backends")
	if code != 0 {
		t.Fatalf("docs backends: exit %d: %s", code, errOut)
	}
	got, err := os.ReadFile("../docs/backends.md")
	if err != nil || string(got) != out {
		t.Errorf("docs/backends.md is out of date: run go run . docs backends > docs/backends.md")
	}
}

// TestReadmeNamesEveryBackend: the README's opening paragraph names every
// backend of the build by its title, as help does from the registry.
func TestReadmeNamesEveryBackend(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	opening, _, _ := strings.Cut(readme, "## ")
	for _, reg := range all.Registry().All() {
		if reg.Title == "" {
			t.Errorf("backend %s has no Title", reg.Name)
			continue
		}
		if !strings.Contains(opening, reg.Title) {
			t.Errorf("README.md's opening paragraph does not name %s (%q)", reg.Name, reg.Title)
		}
	}
}

// TestGitignoreExampleCoversWhatRunsWrite: the .gitignore example in
// docs/configuration.md matches the plan, journal and lock names dlqctl
// writes by default, and an export's usual name.
func TestGitignoreExampleCoversWhatRunsWrite(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```gitignore\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/configuration.md has no gitignore example")
	}
	var patterns []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	plan := "redrive-20261203T101500Z.plan.json"
	for _, name := range []string{plan, "redrive.plan.json", redrive.DefaultJournalPath(plan),
		redrive.LockPath(redrive.DefaultJournalPath(plan)), "backup.ndjson", ".dlqctl-lease"} {
		matched := false
		for _, p := range patterns {
			if m, _ := filepath.Match(p, name); m {
				matched = true
			}
		}
		if !matched {
			t.Errorf("the .gitignore example does not cover %s (patterns %q)", name, patterns)
		}
	}
}
