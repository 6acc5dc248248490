package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTyposGetSuggestions: a mistyped flag, disposition, profile, config
// key, duration or source URL is a usage error (exit 2) that names what
// was meant, as a mistyped command or category does, and never echoes a
// password.
func TestTyposGetSuggestions(t *testing.T) {
	src := incidentSource(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "dlqctl.yaml")
	if err := os.WriteFile(config, []byte("profiles:\n  production:\n    source: "+src+"\n    outptu: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("profiles:\n  production:\n    source: "+src+"\n  staging:\n    source: "+src+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("policy:\n  requre_approval: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("mode: extend\nrules:\n  - name: psp\n    mach: psp\n    disposition: redrive\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--source", src, "list", "--categroy", "schema"}, []string{"unknown flag: --categroy", "Did you mean this?\n\t--category\n"}},
		{[]string{"--source", src, "stats", "--no-colr"}, []string{"Did you mean this?\n\t--no-color\n"}},
		{[]string{"--source", src, "list", "--disposition", "redriv"}, []string{`--disposition "redriv": no such disposition; did you mean "redrive"?`}},
		{[]string{"--source", src, "redrive", "plan", "--allow-disposition", "fix-then-redriv", "--reason", "r", "--out", "p.json"}, []string{`did you mean "fix-then-redrive"?`}},
		{[]string{"--config", good, "--profile", "prodution", "list"}, []string{`profile "prodution": not in ` + good + `; did you mean "production"? (its profiles: production, staging)`}},
		{[]string{"--config", config, "--profile", "production", "list"}, []string{`profile "production": unknown key "outptu"; did you mean "output"? (a profile takes source, fields, event_id_from`}},
		{[]string{"--config", policy, "list"}, []string{`line 2: unknown key "requre_approval"; did you mean "require_approval"?`}},
		{[]string{"--source", src, "--rules", rules, "list"}, []string{`line 4: unknown key "mach"; did you mean "match"?`}},
		{[]string{"--source", src, "list", "--older-than", "3days"}, []string{`--older-than: invalid duration "3days" (e.g. 90s, 15m, 2h, 3d); did you mean 3d?`}},
		{[]string{"--source", src, "check", "--max-age", "2 hours"}, []string{`invalid duration "2 hours"`, "did you mean 2h?"}},
		{[]string{"--source", src, "redrive", "plan", "--settle", "3days", "--reason", "r"}, []string{`"3days"`, "did you mean --settle 72h?"}},
		{[]string{"--source", "redis:/127.0.0.1:6379/0?stream=orders-dlq", "list"}, []string{`did you mean "redis://127.0.0.1:6379/0?stream=orders-dlq"?`}},
		{[]string{"--source", "amqp:guest:s3cret@127.0.0.1:5672/?queue=dlq", "list"}, []string{`did you mean "amqp://guest:xxxxx@127.0.0.1:5672/?queue=dlq"?`}},
	} {
		_, errOut, code := run(t, nil, c.args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, ExitUsage, errOut)
		}
		for _, want := range c.want {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: lacks %q:\n%s", c.args, want, errOut)
			}
		}
		if strings.Contains(errOut, "s3cret") {
			t.Errorf("%v: the password was echoed:\n%s", c.args, errOut)
		}
	}
}
