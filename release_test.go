package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestReleaseShipsEveryManPage: the Homebrew cask lists its man pages one
// by one (a cask takes no glob), so the list must be exactly the pages
// `dlqctl docs man` writes, which scripts/release-assets puts in the
// archives and packages: a new command's page is never left out.
func TestReleaseShipsEveryManPage(t *testing.T) {
	raw, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Casks []struct {
			Manpages []string `yaml:"manpages"`
		} `yaml:"homebrew_casks"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Casks) != 1 {
		t.Fatalf(".goreleaser.yaml has %d homebrew_casks, want 1", len(cfg.Casks))
	}
	dir := t.TempDir()
	if out, err := exec.Command("dlqctl", "docs", "man", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("dlqctl docs man: %v\n%s", err, out)
	}
	pages, err := filepath.Glob(filepath.Join(dir, "*.1"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs man wrote no page (%v)", err)
	}
	var want []string
	for _, p := range pages {
		want = append(want, "manpages/"+filepath.Base(p)+".gz")
	}
	got := slices.Clone(cfg.Casks[0].Manpages)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the cask's manpages are not the pages docs man writes:\n got %s\nwant %s",
			strings.Join(got, " "), strings.Join(want, " "))
	}
}
