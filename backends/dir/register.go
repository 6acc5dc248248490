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
		Parse: func(raw string) (backend.Parsed, error) {
			if _, err := rootOf(raw); err != nil {
				return backend.Parsed{}, err
			}
			return backend.Parsed{Display: raw}, nil
		},
		Init: func(raw string) error {
			root, err := rootOf(raw)
			if err != nil {
				return err
			}
			return Init(root)
		},
		Open: func(_ context.Context, raw string, opts backend.OpenOptions) (backend.Source, error) {
			root, err := rootOf(raw)
			if err != nil {
				return nil, err
			}
			if opts.AllowMissing {
				return OpenAllowMissing(root)
			}
			return Open(root)
		},
	}
}

func rootOf(raw string) (string, error) {
	root := raw[len("dir:"):]
	if root == "" {
		return "", backend.Configf("dir: source needs a path (dir:PATH)")
	}
	return root, nil
}
