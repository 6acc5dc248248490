package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCIDocsChecksRunAsWritten runs every `dlqctl check` that docs/ci.md
// and docs/install.md give for a CI job — in a script, as a container
// step's args, after the image in a `docker run` — as written, through
// bash -e -o pipefail (the shell of a GitHub Actions step), with dlqctl on
// PATH and DLQCTL_SOURCE set as the job would set it: on the sample
// incident it must fail the job (exit 4) and fill the job summary where it
// writes one; on an empty DLQ it must pass.
func TestCIDocsChecksRunAsWritten(t *testing.T) {
	var checks []string
	for _, doc := range []string{"docs/ci.md", "docs/install.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		found := ciChecks(string(b))
		if len(found) == 0 {
			t.Fatalf("%s gives no dlqctl check for a job", doc)
		}
		checks = append(checks, found...)
	}
	if len(checks) < 5 {
		t.Fatalf("found %d checks, want the archive, container and GitLab forms of docs/ci.md and docs/install.md's docker run:\n%s",
			len(checks), strings.Join(checks, "\n"))
	}
	incident, err := filepath.Abs("testdata/incident")
	if err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "error"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, line := range checks {
		t.Run(line, func(t *testing.T) {
			summary := filepath.Join(t.TempDir(), "summary.md")
			code, out := runCICheck(t, line, "dir:"+incident, summary)
			if code != 4 {
				t.Fatalf("on the sample incident: exit %d, want 4 (the job fails)\n%s", code, out)
			}
			if strings.Contains(line, "GITHUB_STEP_SUMMARY") {
				b, _ := os.ReadFile(summary)
				if !strings.Contains(string(b), "| max-total | 0 | 284 |") {
					t.Errorf("the job summary holds no breach table:\n%s", b)
				}
			}
			if code, out := runCICheck(t, line, "dir:"+empty, summary); code != 0 {
				t.Errorf("on an empty DLQ: exit %d, want 0 (the job passes)\n%s", code, out)
			}
		})
	}
}

var (
	// A container step's args, or a docker run of the image: dlqctl's
	// arguments follow.
	ciArgs  = regexp.MustCompile(`^\s*args:\s*(check\b.*)$`)
	ciImage = regexp.MustCompile(`ghcr\.io/dlqctl/dlqctl:\S+\s+(check\b.*)$`)
	ciShell = regexp.MustCompile(`^\s*(?:-\s+)?(dlqctl check\b.*)$`)
)

// ciChecks are the check command lines in doc's code blocks, each as the
// dlqctl command line it runs.
func ciChecks(doc string) []string {
	var lines []string
	inBlock := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		for _, re := range []*regexp.Regexp{ciArgs, ciImage, ciShell} {
			if m := re.FindStringSubmatch(l); m != nil {
				cmd := m[1]
				if !strings.HasPrefix(cmd, "dlqctl ") {
					cmd = "dlqctl " + cmd
				}
				lines = append(lines, cmd)
				break
			}
		}
	}
	return lines
}

// runCICheck runs line in bash as a CI step would, with the job's
// environment: the source, no password (the dir queue needs none) and a
// job summary file.
func runCICheck(t *testing.T, line, source, summary string) (int, string) {
	t.Helper()
	c := exec.Command("bash", "-e", "-o", "pipefail", "-c", line)
	c.Dir = t.TempDir()
	c.Env = append(os.Environ(), "DLQCTL_SOURCE="+source, "DLQCTL_REDIS_PASSWORD=", "GITHUB_STEP_SUMMARY="+summary)
	out, err := c.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	default:
		t.Fatalf("%s: %v", line, err)
		return 0, ""
	}
}
