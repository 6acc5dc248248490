package backend

import (
	"fmt"
	"strings"
)

// Markdown renders the registry as docs/backends.md: the capability
// table, then each backend's URL form and environment variables. A test
// keeps the committed page equal to it.
func (r *Registry) Markdown() string {
	var b strings.Builder
	b.WriteString("# Backends\n\n")
	b.WriteString("Generated from the backend registry by `dlqctl docs backends`; a test keeps it current.\n")
	b.WriteString("A backend is one package that registers itself in `backends/all`.\n\n")
	b.WriteString("| backend | schemes | read | import | move | resolve | re-dead-letter check | stats extras | DLQ lease | pending / quarantine |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	yes := func(v bool) string {
		if v {
			return "yes"
		}
		return "—"
	}
	for _, reg := range r.All() {
		c := reg.Capabilities
		move := c.Move
		if move == "" {
			move = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			reg.Name, "`"+strings.Join(reg.Schemes, "`, `")+"`", yes(c.Read), yes(c.Import), move,
			yes(c.Resolve), yes(c.Tail), yes(c.Extras), yes(c.Lease), yes(c.Pending))
	}
	b.WriteString("\nmove: `atomic` backends publish and remove in one conditional step, so a crash can never\n")
	b.WriteString("move an entry twice; `two-step` backends publish, then remove, and the journal covers the gap:\n")
	b.WriteString("a send whose outcome is unknown is sent again with the same event ID and journaled `ambiguous`.\n")
	for _, reg := range r.All() {
		fmt.Fprintf(&b, "\n## %s\n\n`%s`\n\n%s.\n", reg.Name, reg.Usage, reg.Summary)
		if len(reg.Env) > 0 {
			b.WriteString("\n| environment | what |\n|---|---|\n")
			for _, e := range reg.Env {
				fmt.Fprintf(&b, "| `%s` | %s |\n", e.Name, e.Help)
			}
		}
	}
	return b.String()
}
