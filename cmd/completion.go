package cmd

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/report"
)

// registerCompletions teaches shell completion the values of flags and
// arguments: categories, dispositions, output formats, profiles, and plan
// and journal files, so that a tab at 3 a.m. offers what is valid.
func registerCompletions(f *Factory, root *cobra.Command) {
	formats := func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, fm := range formatsFor(c) {
			out = append(out, string(fm))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	profiles := func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		cfg, err := loadConfig(firstNonEmpty(f.Global.ConfigPath, f.Getenv("DLQCTL_CONFIG")), f.Getenv, f.Backends.ProfileKeys())
		if err != nil || cfg == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return sortedKeys(cfg.Profiles), cobra.ShellCompDirectiveNoFileComp
	}
	_ = root.RegisterFlagCompletionFunc("output", formats)
	_ = root.RegisterFlagCompletionFunc("profile", profiles)
	_ = root.RegisterFlagCompletionFunc("source", sourceCompletion(f))
	walk(root, func(c *cobra.Command) {
		if fl := c.Flags().Lookup("category"); fl != nil {
			_ = c.RegisterFlagCompletionFunc("category", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return categoryNames(f), cobra.ShellCompDirectiveNoFileComp
			})
		}
		for _, name := range []string{"disposition", "allow-disposition"} {
			if fl := c.Flags().Lookup(name); fl != nil {
				_ = c.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
					return envelope.Dispositions(), cobra.ShellCompDirectiveNoFileComp
				})
			}
		}
		if fl := c.Flags().Lookup("journal"); fl != nil {
			_ = c.RegisterFlagCompletionFunc("journal", fileKinds(kindJournal))
		}
		if fl := c.Flags().Lookup("sign-with"); fl != nil {
			_ = c.RegisterFlagCompletionFunc("sign-with", sshKeyFiles(f.Getenv("HOME")))
		}
		switch {
		case c.Name() == "show" && c.HasParent() && c.Parent().HasParent(),
			c.Name() == "approve", c.Name() == "apply":
			c.ValidArgsFunction = fileKinds(kindPlan)
		case c.Name() == "status", c.Name() == "resume":
			c.ValidArgsFunction = fileKinds(kindJournal)
		}
	})
}

// formatsFor is the output formats command c writes: openmetrics only
// for stats and check, the others for every command. Before a command is
// typed (c is the root) every format may still apply.
func formatsFor(c *cobra.Command) []report.Format {
	var out []report.Format
	for _, fm := range report.Formats() {
		if fm == report.FormatOpenMetrics && c.HasParent() && c.Name() != "stats" && c.Name() != "check" {
			continue
		}
		out = append(out, fm)
	}
	return out
}

// sourceCompletion offers the URL schemes of the backends this build has
// ("redis://", "dir:"), from the registry; after a path scheme such as
// dir:, the folders below what is typed.
func sourceCompletion(f *Factory) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		var prefixes []string
		for _, reg := range f.Backends.All() {
			for _, scheme := range reg.Schemes {
				// Only a scheme whose usage reads SCHEME:PATH is a path
				// (dir:PATH); the others are SCHEME://HOST.
				if !strings.HasPrefix(reg.Usage, scheme+":") || strings.HasPrefix(reg.Usage, scheme+"://") {
					prefixes = append(prefixes, scheme+"://")
					continue
				}
				prefix := scheme + ":"
				if rest, ok := strings.CutPrefix(toComplete, prefix); ok {
					return folders(prefix, rest), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
				}
				prefixes = append(prefixes, prefix)
			}
		}
		sort.Strings(prefixes)
		return prefixes, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// folders are the folders below the one being typed, each after prefix.
func folders(prefix, typed string) []string {
	dir := filepath.Dir(typed)
	if strings.HasSuffix(typed, "/") {
		dir = typed
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if dir == "." && !strings.HasPrefix(typed, "./") {
			p = e.Name()
		}
		out = append(out, prefix+p+"/")
	}
	sort.Strings(out)
	return out
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// categoryNames are the categories of the rules in effect: those of
// --rules or the config when they load, else the defaults. Completion runs
// without the command's setup, so it loads the config itself.
func categoryNames(f *Factory) []string {
	cl := envelope.NewClassifier(envelope.DefaultRules())
	if cfg, err := loadConfig(firstNonEmpty(f.Global.ConfigPath, f.Getenv("DLQCTL_CONFIG")), f.Getenv, f.Backends.ProfileKeys()); err == nil {
		f.config = cfg
		if p, err := cfg.profile(firstNonEmpty(f.Global.Profile, f.Getenv("DLQCTL_PROFILE"))); err == nil {
			f.profile = p
		}
		if c, err := f.classifier(); err == nil {
			cl = c
		}
	}
	var out []string
	for _, c := range cl.Categories() {
		out = append(out, c.Category)
	}
	return out
}

type fileKind int

const (
	kindPlan fileKind = iota
	kindJournal
)

// fileKinds completes files in the folder being typed whose first bytes
// say they are a plan (a dlqctl.plan/v1 document) or a journal (anything
// else dlqctl writes next to a plan, *.journal), plus folders to descend.
func fileKinds(kind fileKind) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		dir := filepath.Dir(toComplete)
		if strings.HasSuffix(toComplete, "/") {
			dir = toComplete
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, cobra.ShellCompDirectiveDefault
		}
		var out []string
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if dir == "." && !strings.HasPrefix(toComplete, "./") {
				p = e.Name()
			}
			if e.IsDir() {
				out = append(out, p+"/")
				continue
			}
			if k, ok := sniffKind(p); ok && k == kind {
				out = append(out, p)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// sshKeyFiles completes SSH keys to sign with: files in the folder being
// typed that hold an SSH private or public key, and, before a folder is
// typed, those in ~/.ssh (id_ed25519, id_ed25519.pub, …).
func sshKeyFiles(home string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		dir := filepath.Dir(toComplete)
		if strings.HasSuffix(toComplete, "/") {
			dir = toComplete
		}
		var out []string
		add := func(dir string, bare bool) {
			ents, err := os.ReadDir(dir)
			if err != nil {
				return
			}
			for _, e := range ents {
				p := filepath.Join(dir, e.Name())
				if bare {
					p = e.Name()
				}
				switch {
				case e.IsDir() && !strings.HasPrefix(e.Name(), "."):
					out = append(out, p+"/")
				case !e.IsDir() && isSSHKey(filepath.Join(dir, e.Name())):
					out = append(out, p)
				}
			}
		}
		add(dir, dir == "." && !strings.HasPrefix(toComplete, "./"))
		if !strings.Contains(toComplete, "/") && home != "" {
			add(filepath.Join(home, ".ssh"), false)
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// isSSHKey sniffs a file's first bytes for an OpenSSH or PEM private key,
// or a public key line.
func isSSHKey(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 64)
	n, _ := f.Read(head)
	h := string(head[:n])
	for _, prefix := range []string{"-----BEGIN OPENSSH PRIVATE KEY", "-----BEGIN RSA PRIVATE KEY", "-----BEGIN EC PRIVATE KEY", "-----BEGIN PRIVATE KEY", "ssh-", "ecdsa-sha2-", "sk-"} {
		if strings.HasPrefix(h, prefix) {
			return true
		}
	}
	return false
}
