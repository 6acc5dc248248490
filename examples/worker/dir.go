package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// Folders of a directory queue.
const (
	inboxDir = "inbox"
	doneDir  = "done"
	errorDir = "error"
	fileExt  = ".json"
)

// dlqNameTime names DLQ files: it sorts in time order, after the names of
// files dead-lettered earlier.
const dlqNameTime = "20060102T150405.000000000Z"

// dirMode consumes a directory queue's inbox and dead-letters into its
// error folder.
func dirMode() mode {
	return mode{
		prefixes: []string{"dir:"},
		usage:    "dir:PATH",
		help:     "dir:PATH",
		open: func(_ context.Context, opts Options, _ io.Writer) (Source, error) {
			return openDirSource(strings.TrimPrefix(opts.Source, "dir:"))
		},
	}
}

// dirSource consumes PATH/inbox/*.json in name order.
type dirSource struct {
	root  string
	names []string // listed, not yet delivered
}

func openDirSource(root string) (*dirSource, error) {
	if root == "" {
		return nil, usagef("--source dir: needs a path (dir:PATH)")
	}
	for _, d := range []string{inboxDir, doneDir, errorDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	return &dirSource{root: root}, nil
}

func (s *dirSource) Next(ctx context.Context) (Message, Receipt, error) {
	for {
		if len(s.names) == 0 {
			if err := s.list(); err != nil {
				return Message{}, nil, err
			}
		}
		if len(s.names) == 0 {
			select {
			case <-ctx.Done():
				return Message{}, nil, ctx.Err()
			case <-time.After(pollWait):
			}
			return Message{}, nil, errIdle
		}
		name := s.names[0]
		s.names = s.names[1:]
		data, err := os.ReadFile(filepath.Join(s.root, inboxDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // taken by another worker since the listing
		}
		if err != nil {
			return Message{}, nil, err
		}
		id := strings.TrimSuffix(name, fileExt)
		m := Message{ID: name, Envelope: envelope.DecodeFile(id, data)}
		return m, &dirReceipt{root: s.root, name: name, env: m.Envelope, raw: data}, nil
	}
}

// list reads the inbox's file names in order. Temporary files (a writer's
// .tmp-…) start with a dot and are not messages yet.
func (s *dirSource) list() error {
	ents, err := os.ReadDir(filepath.Join(s.root, inboxDir))
	if err != nil {
		return err
	}
	for _, de := range ents {
		n := de.Name()
		if de.Type().IsRegular() && strings.HasSuffix(n, fileExt) && !strings.HasPrefix(n, ".") {
			s.names = append(s.names, n)
		}
	}
	slices.Sort(s.names)
	return nil
}

// dirReceipt is one file of the inbox, there until it is acked or
// dead-lettered.
type dirReceipt struct {
	root string
	name string            // the file's name in the inbox
	env  envelope.Envelope // the file decoded
	raw  []byte            // the file's bytes
}

// Ack moves inbox/NAME to done/NAME (done/NAME.<ns>.json if a file of
// that name was done before: an archive is never overwritten).
func (r *dirReceipt) Ack(ctx context.Context) error {
	dst := filepath.Join(r.root, doneDir, r.name)
	if _, err := os.Lstat(dst); err == nil {
		dst = filepath.Join(r.root, doneDir, fmt.Sprintf("%s.%d%s", strings.TrimSuffix(r.name, fileExt), time.Now().UnixNano(), fileExt))
	}
	if err := os.Rename(filepath.Join(r.root, inboxDir, r.name), dst); err != nil {
		return err
	}
	if err := syncDir(filepath.Join(r.root, doneDir)); err != nil {
		return err
	}
	return syncDir(filepath.Join(r.root, inboxDir))
}

// DeadLetter writes error/<time>-<event_id>.json, a canonical envelope
// with the dead-letter fields, then removes the inbox file. A crash between
// the two leaves the message in the inbox: it is delivered again, counted
// again, and dead-lettered again.
func (r *dirReceipt) DeadLetter(ctx context.Context, dl DeadLetter) error {
	e := r.env
	name := dl.At.UTC().Format(dlqNameTime) + "-" + fileSafe(e.EventID)
	data := r.raw // a malformed file goes as it came: it cannot be re-encoded
	if e.Malformed == "" {
		e.ID = name
		e.Fingerprint = e.CarriedFingerprint()
		e.LastError, e.ErrorClass = dl.LastError, ""
		e.Attempts = int(dl.Attempts)
		e.DeadLetteredAt = dl.At.UTC()
		if e.Origin.Backend == "" {
			e.Origin.Backend = "dir"
		}
		b, err := envelope.MarshalIndent(e)
		if err != nil {
			return err
		}
		data = b
	}
	errDir := filepath.Join(r.root, errorDir)
	if err := writeNew(errDir, name+fileExt, data); err != nil {
		return fmt.Errorf("dead-letter %s: %w", r.name, err)
	}
	if err := os.Remove(filepath.Join(r.root, inboxDir, r.name)); err != nil {
		return err
	}
	return syncDir(filepath.Join(r.root, inboxDir))
}

func (s *dirSource) Close() error { return nil }

// fileSafe keeps the characters dlqctl accepts in a dir entry id.
func fileSafe(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:@+=-", c) >= 0
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > 150 {
		b = b[:150]
	}
	if len(b) == 0 {
		return "no-event-id"
	}
	return string(b)
}

// writeNew writes dir/name under a temporary name, syncs it and links it
// into place, so that a reader never sees half a file and an existing file
// is never replaced.
func writeNew(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-"+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
