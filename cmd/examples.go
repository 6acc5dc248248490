package cmd

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Examples: sections of commands that do not set their
// own, by command path. Every runnable command has one (a test checks); the
// paths they use exist in a checkout (testdata/incident) or are made by
// the example before them.
var examples = map[string]string{
	"dlqctl categorize": `  dlqctl categorize --source dir:testdata/incident
  dlqctl categorize --source dir:testdata/incident --explain
  dlqctl categorize --source dir:testdata/incident --jq '.categories[] | select(.disposition == "redrive") | .name'`,
	"dlqctl sample": `  dlqctl sample --source dir:testdata/incident --per-category 2 --seed 7
  dlqctl sample --source dir:testdata/incident --category schema --redact customer.id -o json`,
	"dlqctl show": `  dlqctl show --source dir:testdata/incident 20261129T083821Z-0027
  dlqctl show --source dir:testdata/incident evt-22006c7fe6c3 -o json`,
	"dlqctl stats": `  dlqctl stats --source dir:testdata/incident
  dlqctl stats --source dir:testdata/incident -o openmetrics > /var/lib/node_exporter/dlq.prom
  dlqctl stats --source redis://127.0.0.1:6379/0?stream=orders-dlq --watch --interval 10s`,
	"dlqctl import": `  dlqctl export --source dir:testdata/incident --out backup.ndjson
  dlqctl import --source dir:/tmp/dlq-copy --init backup.ndjson
  dlqctl import --source redis://127.0.0.1:6379/0?stream=orders-dlq --skip-existing backup.ndjson`,
	"dlqctl version":               "  dlqctl version\n  dlqctl version -o json",
	"dlqctl docs man":              "  mkdir -p man && dlqctl docs man --dir man",
	"dlqctl docs markdown":         "  dlqctl docs markdown --dir docs/commands",
	"dlqctl doctor":                "  dlqctl doctor --source redis://127.0.0.1:6379/0?stream=orders-dlq --effects sqlite:inbox.db\n  dlqctl doctor --profile incident",
	"dlqctl completion":            "  source <(dlqctl completion bash)\n  dlqctl __complete list --category ''   # what a tab offers",
	"dlqctl docs":                  "  dlqctl docs markdown --dir docs/commands",
	"dlqctl completion bash":       "  source <(dlqctl completion bash)",
	"dlqctl completion zsh":        "  dlqctl completion zsh > \"${fpath[1]}/_dlqctl\"",
	"dlqctl completion fish":       "  dlqctl completion fish > ~/.config/fish/completions/dlqctl.fish",
	"dlqctl completion powershell": "  dlqctl completion powershell | Out-String | Invoke-Expression",

	"dlqctl redrive": `  dlqctl redrive --source dir:testdata/incident --category transient --reason "INC-7: payments back" --dry-run
  dlqctl redrive --source dir:testdata/incident --category transient --max 20 --settle 0s --reason "INC-7" --yes`,
	"dlqctl redrive plan": `  dlqctl redrive plan --source dir:testdata/incident --category transient --reason "INC-7: payments back" \
    --effects sqlite:inbox.db --settle 30s --out redrive.plan.json`,
	"dlqctl redrive approve": `  export DLQCTL_APPROVAL_KEY=$(openssl rand -hex 32)   # once, shared by approver and applier
  dlqctl redrive approve redrive.plan.json --by alice --ttl 2h`,
	"dlqctl redrive apply":   "  dlqctl redrive apply --source dir:testdata/incident redrive.plan.json",
	"dlqctl redrive status":  "  dlqctl redrive status redrive.plan.journal\n  dlqctl redrive status redrive.plan.journal -o json --jq .status",
	"dlqctl redrive resume":  "  dlqctl redrive resume redrive.plan.journal\n  dlqctl redrive resume redrive.plan.journal --past-gate   # after a gate, once its cause is fixed",
	"dlqctl resolve":         `  dlqctl resolve --source dir:testdata/incident --category missing-reference --reason "GDPR purge" --dry-run`,
	"dlqctl resolve plan":    `  dlqctl resolve plan --source dir:testdata/incident --category missing-reference --reason "GDPR purge" --out resolve.plan.json`,
	"dlqctl resolve approve": "  dlqctl resolve approve resolve.plan.json --by alice",
	"dlqctl resolve apply":   "  dlqctl resolve apply --source dir:testdata/incident resolve.plan.json",
	"dlqctl resolve status":  "  dlqctl resolve status resolve.plan.journal",
	"dlqctl resolve resume":  "  dlqctl resolve resume resolve.plan.journal",
}

// addExamples fills in the Examples: of commands that have none.
func addExamples(root *cobra.Command) {
	walk(root, func(c *cobra.Command) {
		if strings.TrimSpace(c.Example) == "" {
			c.Example = examples[c.CommandPath()]
		}
	})
}
