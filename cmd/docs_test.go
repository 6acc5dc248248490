package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/all"
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

func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := run(t, nil, "docs", "man", "--dir", dir); code != 0 {
		t.Fatalf("docs man: exit %d: %s", code, errOut)
	}
	for _, page := range []string{"dlqctl.1", "dlqctl-stats.1", "dlqctl-redrive-apply.1"} {
		if _, err := os.Stat(filepath.Join(dir, page)); err != nil {
			t.Errorf("no man page %s: %v", page, err)
		}
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
