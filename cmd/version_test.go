package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/report"
)

// TestRunVersion calls version's run function with its options, as every
// command's run function can be called: no command line, no Factory.
func TestRunVersion(t *testing.T) {
	b := BuildInfo{Version: "1.2.3", Commit: "abc1234", Date: "2026-01-02"}
	for _, tc := range []struct {
		format report.Format
		want   string
	}{
		{report.FormatTable, "dlqctl 1.2.3 (commit abc1234, " + runtime.Version() + ")\n"},
		{report.FormatJSON, `{"schema":"dlqctl.version/v1","version":"1.2.3","commit":"abc1234","date":"2026-01-02","go":"` + runtime.Version() + `"}`},
		{report.FormatNDJSON, `{"schema":"dlqctl.version/v1","version":"1.2.3","commit":"abc1234","date":"2026-01-02","go":"` + runtime.Version() + `"}`},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			io, _, out, _ := TestIO()
			if err := runVersion(&versionOptions{IO: io, Build: b, Report: report.Options{Format: tc.format}}); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if tc.format.IsJSON() {
				var a, b any
				if err := json.Unmarshal([]byte(got), &a); err != nil {
					t.Fatalf("%q: %v", got, err)
				}
				json.Unmarshal([]byte(tc.want), &b)
				if ga, _ := json.Marshal(a); string(ga) != string(mustJSON(t, b)) {
					t.Fatalf("got %s, want %s", got, tc.want)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVersionOptionsFromTheCommandLine: the command line's settings reach
// the options (runF sees them), and the run function is not called.
func TestVersionOptionsFromTheCommandLine(t *testing.T) {
	io, _, out, _ := TestIO()
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: func() time.Time { return testNow }, Getenv: func(string) string { return "" }, Build: BuildInfo{Version: "9.9.9"}}}
	var got *versionOptions
	execSub(t, f, newVersionCmd(f, func(o *versionOptions) error { got = o; return nil }), "version", "-o", "json")
	if got == nil || got.Build.Version != "9.9.9" || got.Report.Format != report.FormatJSON || got.IO != io {
		t.Fatalf("options %+v", got)
	}
	if out.Len() != 0 {
		t.Fatalf("the run function ran: %q", out)
	}
}

// execSub runs one command built with a runF under a root that resolves
// the settings as dlqctl's does, with -o as its one persistent flag.
func execSub(t *testing.T, f *Factory, sub *cobra.Command, args ...string) {
	t.Helper()
	root := &cobra.Command{Use: "dlqctl", PersistentPreRunE: func(c *cobra.Command, _ []string) error { return f.resolve(c) }}
	root.PersistentFlags().StringVarP(&f.Global.Output, "output", "o", "", "")
	root.AddCommand(sub)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
}

// TestWriteManPages calls docs man's run function directly.
func TestWriteManPages(t *testing.T) {
	io, _, _, errOut := TestIO()
	root := &cobra.Command{Use: "dlqctl", Short: "root"}
	root.AddCommand(&cobra.Command{Use: "sub", Short: "a sub command", Run: func(*cobra.Command, []string) {}})
	dir := filepath.Join(t.TempDir(), "new", "man")
	if err := writeManPages(&docsOptions{IO: io, Root: root, Version: "1.2.3", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "dlqctl-sub.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dlqctl 1.2.3", ".SH EXIT STATUS", "a sub command"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if !strings.Contains(errOut.String(), "man pages written to "+dir) {
		t.Errorf("stderr %q", errOut)
	}
}
