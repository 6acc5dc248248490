package cmd

import "github.com/dlqctl/dlqctl/backend"

// commandLines write the dlqctl command lines a command prints as advice
// (resume, apply, re-plan, list) so that they run as printed in a fresh
// shell: with the global flags of this invocation that shape what they do,
// and, for a recorded URL that hides a password, the backend's variable
// that gives it (secretNotes, sourceArg).
type commandLines struct {
	global   GlobalOptions
	backends *backend.Registry
}
