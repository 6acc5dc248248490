package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redrive"
)

// Every command that dlqctl prints for someone to run (resume, re-plan,
// approve, apply) runs as printed in a POSIX shell: one command a line,
// what to know first as "#" comment lines of their own, and never a
// secret. A password that a plan or a journal hides (the display form of a
// URL shows it as xxxxx) is named by the variable it is read from instead,
// and dlqctl reads it from there when it opens that URL.

// effectsPasswordEnv gives the effects store's password when its URL
// carries none, or hides it.
const effectsPasswordEnv = "DLQCTL_EFFECTS_PASSWORD"

// shellLines writes notes as "#" comment lines, then the commands, one a
// line, each indented under the sentence that introduces them. The text
// pasted into a shell runs as it reads.
func shellLines(notes []string, commands ...string) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("  # " + n + "\n")
	}
	for _, c := range commands {
		b.WriteString("  " + c + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// secretNotes say what must be set before a printed command that runs the
// plan p (its resume, apply or re-plan) can run: the password of its
// source or effects store, which plans and journals never keep.
func (l commandLines) secretNotes(p *redrive.Plan) []string {
	var notes []string
	if backend.HidesPassword(p.Source) {
		if name := l.backends.PasswordEnv(p.Source); name != "" {
			notes = append(notes, fmt.Sprintf("set %s to the source's password first: plans and journals do not keep it", name))
		} else {
			notes = append(notes, "set DLQCTL_SOURCE to the source URL with its password first: plans and journals do not keep it")
		}
	}
	if backend.HidesPassword(p.Params.Effects) {
		notes = append(notes, fmt.Sprintf("set %s to the effects store's password first: plans and journals do not keep it", effectsPasswordEnv))
	}
	return notes
}

// sourceArg is the --source value a printed command gives for a source
// recorded in its display form: the URL itself, or, when it hides a
// password, the URL without it (the note from secretNotes names the
// variable that gives it). "" when the URL cannot be printed without a
// secret and no variable gives it: the note then asks for DLQCTL_SOURCE.
func (l commandLines) sourceArg(recorded string) string {
	switch {
	case !strings.Contains(recorded, backend.Redacted):
		return recorded
	case backend.HidesPassword(recorded) && l.backends.PasswordEnv(recorded) != "":
		return backend.WithoutPassword(recorded)
	}
	return ""
}

// effectsArg is the --effects value a printed command gives for an
// effects URL recorded in its display form (see sourceArg).
func effectsArg(recorded string) string {
	if backend.HidesPassword(recorded) {
		return backend.WithoutPassword(recorded)
	}
	return recorded
}

// withHiddenPassword is the URL to open for raw, a URL whose password may
// be hidden (a plan's or a journal's display form, or such a URL given on
// the command line): the password comes from the variable env names. A
// hidden password whose variable is unset is a usage error that names it.
func withHiddenPassword(raw, env, what string, getenv func(string) string) (string, error) {
	if !backend.HidesPassword(raw) {
		return raw, nil
	}
	if env == "" {
		return "", usageErrorf("%s %s: its password is hidden (plans and journals do not keep it): give the URL with it", what, raw)
	}
	pw := getenv(env)
	if pw == "" {
		return "", usageErrorf("%s %s: its password is hidden (plans and journals do not keep it): set %s to it", what, raw, env)
	}
	return backend.WithPassword(raw, pw), nil
}

// againPlanPath is where a re-plan printed after a run of the plan at
// planPath writes: beside it, named for the kind and the time, and
// numbered when that name is taken, so that two re-plans in one folder
// never meet: the first one's run would have a journal by the second.
func againPlanPath(kind, planPath string, now func() string) string {
	dir := "."
	if planPath != "" {
		dir = filepath.Dir(planPath)
	}
	base := fmt.Sprintf("%s-again-%s", kind, now())
	for n := 1; ; n++ {
		name := base + ".plan.json"
		if n > 1 {
			name = fmt.Sprintf("%s-%d.plan.json", base, n)
		}
		p := name
		if dir != "." {
			p = filepath.Join(dir, name)
		}
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			return p
		}
	}
}

// checkPlanOut refuses to write a plan over the plan at path when that
// plan's run has a journal beside it: the journal would lose its plan,
// and apply (which would say "resume it") and resume (which would find
// another digest) would refuse each other in a loop. A plan without a run
// is a draft: it is replaced, and its approvals with it, which apply then
// says.
func checkPlanOut(path string) error {
	journal := redrive.DefaultJournalPath(path)
	if _, err := os.Lstat(journal); err != nil {
		return nil
	}
	return usageErrorf("--out %s: that plan's run has a journal (%s); a new plan there would leave the journal without its plan: write it elsewhere (another --out)", path, journal)
}

// refuseEmpty refuses to approve or apply a plan that moves nothing: it
// was made from a selection that took no entry (plan no longer writes
// one), and a run of it would "complete" having done nothing.
func refuseEmpty(plan *redrive.Plan, path, verb string) error {
	if plan.Entries.Len() > 0 {
		return nil
	}
	return usageErrorf("%s holds no entries: there is nothing to %s (its selection left %s out; the plan's show says why)", path, verb, entries(len(plan.Excluded)))
}
