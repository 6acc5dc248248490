package dirqueue

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
)

// Registration describes the directory queue to the command layer.
func Registration() backend.Registration {
	return backend.Registration{
		Name:    "dir",
		Schemes: []string{"dir"},
		Title:   "a directory queue",
		Usage:   "dir:PATH",
		Summary: "`PATH/error/*.json`, one envelope per file, redriven to `PATH/inbox/`; needs no server",
		Capabilities: backend.Capabilities{
			Read: true, Import: true, Move: "atomic", Resolve: true, Tail: true, Lease: true,
		},
		Factory: backend.NewFactory(parseURL, openURL),
		Init: func(raw string) error {
			root, err := rootOf(raw)
			if err != nil {
				return err
			}
			return Init(root)
		},
	}
}

// queueURL is a parsed dir:PATH.
type queueURL struct{ raw, root string }

func (u queueURL) Display() string   { return u.raw }
func (u queueURL) Secrets() []string { return nil }

func parseURL(raw string) (queueURL, error) {
	root, err := rootOf(raw)
	return queueURL{raw: raw, root: root}, err
}

// openURL opens the queue a parsed URL names; with AllowMissing, a queue
// without its error/ folder reads as empty.
func openURL(_ context.Context, u queueURL, opts backend.OpenOptions) (backend.Source, error) {
	if opts.AllowMissing {
		return OpenAllowMissing(u.root)
	}
	return Open(u.root)
}

func rootOf(raw string) (string, error) {
	root := raw[len("dir:"):]
	if root == "" {
		return "", backend.Configf("dir: source needs a path (dir:PATH)")
	}
	return root, nil
}
