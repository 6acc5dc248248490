package cmd

import (
	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
)

// refuseMissing: a read of a DLQ that does not exist would show it empty
// (a check or stats green forever: a typo in a CI URL hides a full DLQ),
// so it is a usage error naming the DLQ unless --allow-missing says empty
// is meant. offered says that the command takes --allow-missing, which the
// error then points at.
func refuseMissing(src backend.Source, allow, offered bool) error {
	m, ok := src.(backend.MissingReporter)
	if !ok || allow {
		return nil
	}
	what := m.MissingDLQ()
	if what == "" {
		return nil
	}
	if !offered {
		return usageErrorf("%s; check the source", what)
	}
	return usageErrorf("%s; check the source (--allow-missing reads a missing DLQ as empty on purpose)", what)
}

// allowMissingUsage is the help of --allow-missing.
const allowMissingUsage = "read a DLQ that does not exist (stream, queue folder, topic) as empty instead of exit 2"

// refusingMissing makes c, a command that reads the DLQ, refuse one that
// does not exist (exit 2, naming it): a typo in a source URL must not read
// as an empty DLQ, to a person or a script. With allow, c takes
// --allow-missing to read it as empty on purpose (what scripts that poll
// a DLQ created on its first dead letter need); without, there is nothing
// to do with an empty one (a plan, one entry, the browser).
func refusingMissing(f *Factory, c *cobra.Command, allow bool) *cobra.Command {
	var allowed bool
	if allow {
		c.Flags().BoolVar(&allowed, "allow-missing", false, allowMissingUsage)
	}
	run := c.RunE
	c.RunE = func(c *cobra.Command, args []string) error {
		f.allowMissing, f.refusesMissing, f.offersAllowMissing = allowed, true, allow
		return run(c, args)
	}
	return c
}
