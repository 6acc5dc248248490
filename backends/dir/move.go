package dirqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/atomicfile"
)

var (
	_ backend.Mover  = (*Queue)(nil)
	_ backend.Tailer = (*Queue)(nil)
)

// Atomic: a move is one rename, which happens only if the DLQ file is
// still there.
func (q *Queue) Atomic() bool { return true }

// DefaultDest is the queue's inbox folder, whatever the envelope's origin.
func (q *Queue) DefaultDest(string) string { return filepath.Join(q.root, inboxDir) }

// Publish moves each item's file error/<id>.json into the folder item.Dest
// (the inbox when empty), which must be on the DLQ's filesystem.
//
// The DLQ file is first rewritten in place with the markers and
// redrive_count + 1, and only then renamed into the destination. The move
// itself stays one rename, so it happens at most once, and a crash between
// the two steps leaves the entry in the DLQ with its markers, not moved: a
// resume finds it present and moves it again, and as it already carries
// this run's id its redrive_count is not raised a second time.
//
// The rewrite replaces the file only if it is still there (on Linux, an
// exchange of names), and the move never replaces a file in the
// destination (RENAME_NOREPLACE), so a file the consumer has not taken yet
// is never clobbered. Both folders are synced before Publish returns, that
// is before the journal records the moves.
func (q *Queue) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	dirs := map[string]bool{}
	for i, it := range items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dest := it.Dest
		if dest == "" {
			dest = q.DefaultDest("")
		}
		results[i] = q.publishOne(it, dest, m)
		if results[i].Err == nil {
			dirs[dest] = true
		}
	}
	if len(dirs) > 0 {
		dirs[filepath.Join(q.root, errorDir)] = true
	}
	for dir := range dirs {
		if err := atomicfile.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("%s: sync %s: %w", q, dir, err)
		}
	}
	return results, nil
}

func (q *Queue) publishOne(it backend.MoveItem, dest string, m backend.Markers) backend.MoveResult {
	fail := func(err error) backend.MoveResult { return backend.MoveResult{Err: err} }
	if !safeID.MatchString(it.ID) {
		return fail(fmt.Errorf("%q: %w in %s", it.ID, backend.ErrNotFound, q))
	}
	name := it.ID + ext
	// An entry no longer in the DLQ is gone whatever the destination
	// holds: to a resume, gone means the move had happened.
	src := q.path(it.ID)
	data, info, err := readEntry(src)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, q))
	}
	if ne, ok := asNotEntry(err); ok {
		return fail(fmt.Errorf("move %s: %s", it.ID, ne.reason))
	}
	if err != nil {
		return fail(fmt.Errorf("move %s: %w", it.ID, err))
	}
	st, err := os.Stat(dest)
	if err == nil && !st.IsDir() {
		err = errors.New("not a folder")
	}
	if err != nil {
		return fail(fmt.Errorf("move %s: destination folder %s: %w", it.ID, dest, err))
	}
	if dlq, err := os.Stat(filepath.Join(q.root, errorDir)); err == nil && !sameDevice(dlq, st) {
		return fail(crossDeviceErr(it.ID, dest, q.root))
	}
	target := filepath.Join(dest, name)
	// Checked before the DLQ copy gets markers for a move that cannot
	// happen; the rename below checks again, atomically.
	if _, err := os.Lstat(target); err == nil {
		return fail(existsErr(it.ID, dest))
	}
	e := envelope.DecodeFile(it.ID, data)
	if e.Malformed != "" {
		return fail(fmt.Errorf("move %s: the file is malformed (%s): a redrive must add its markers to a readable envelope; fix or resolve it", it.ID, e.Malformed))
	}
	if !strings.EqualFold(e.Fingerprint, it.Fingerprint) {
		return fail(fmt.Errorf("entry %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, e.Fingerprint))
	}
	marked, err := MarshalFile(withMarkers(e, it, m))
	if err != nil {
		return fail(fmt.Errorf("move %s: %w", it.ID, err))
	}
	if !bytes.Equal(marked, data) {
		if err := q.rewrite(it.ID, marked, info); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fail(fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, q))
			}
			return fail(fmt.Errorf("move %s: mark the DLQ file: %w", it.ID, err))
		}
	}
	switch err := renameNoReplace(src, target); {
	case err == nil:
		return backend.MoveResult{DestID: name, Removed: true}
	case errors.Is(err, fs.ErrExist):
		return fail(existsErr(it.ID, dest))
	case errors.Is(err, fs.ErrNotExist):
		return fail(fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, q))
	case isCrossDevice(err):
		return fail(crossDeviceErr(it.ID, dest, q.root))
	default:
		return fail(fmt.Errorf("move %s: %w", it.ID, err))
	}
}

func crossDeviceErr(id, dest, root string) error {
	return fmt.Errorf("move %s: %s is not on the same filesystem (or mount) as %s, and a move must be one rename: pick a folder there", id, dest, root)
}

func existsErr(id, dest string) error {
	return fmt.Errorf("move %s: %s already has %s%s; it was not replaced", id, dest, id, ext)
}

// withMarkers is e as it goes back: redrive_count one higher unless this
// run already raised it, the run's markers in its properties, and the
// fingerprint as carried (a computed one is never written as if the
// producer had vouched for it).
func withMarkers(e envelope.Envelope, it backend.MoveItem, m backend.Markers) envelope.Envelope {
	if m.RunID == "" || e.Properties[backend.MarkerRunID] != m.RunID {
		e.RedriveCount++
	}
	props := make(map[string]string, len(e.Properties)+3)
	for k, v := range e.Properties {
		props[k] = v
	}
	props[backend.MarkerRunID] = m.RunID
	props[backend.MarkerSeq] = strconv.FormatInt(it.Seq, 10)
	props[backend.MarkerRedrivenFrom] = it.ID
	e.Properties = props
	e.Fingerprint = e.CarriedFingerprint()
	return e
}

// rewrite replaces error/<id>.json with data if the file is still there:
// written under a temporary name, synced, then put in its place.
// It keeps the mode and, where it may, the owner of the file it replaces
// (like), so that a consumer running as another user can still read it.
func (q *Queue) rewrite(id string, data []byte, like fs.FileInfo) error {
	// After an exchange the temporary name holds the old version, which
	// withTempFile removes.
	return withTempFile(filepath.Join(q.root, errorDir), id, data, like, func(tmp string) error {
		return replaceIfPresent(tmp, q.path(id))
	})
}

// Remove deletes each item's file error/<id>.json, then syncs the folder.
func (q *Queue) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	removed := false
	for i, it := range items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !safeID.MatchString(it.ID) {
			results[i].Err = fmt.Errorf("%q: %w in %s", it.ID, backend.ErrNotFound, q)
			continue
		}
		switch err := os.Remove(q.path(it.ID)); {
		case err == nil:
			results[i].Removed = true
			removed = true
		case errors.Is(err, fs.ErrNotExist):
			results[i].Err = fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, q)
		default:
			results[i].Err = fmt.Errorf("remove %s: %w", it.ID, err)
		}
	}
	if removed {
		if err := atomicfile.SyncDir(filepath.Join(q.root, errorDir)); err != nil {
			return nil, fmt.Errorf("%s: sync %s: %w", q, errorDir, err)
		}
	}
	return results, nil
}

// Tail is the largest entry id in error/, "" when it is empty.
func (q *Queue) Tail(ctx context.Context) (string, error) {
	ids, err := q.names()
	if err != nil || len(ids) == 0 {
		return "", err
	}
	return ids[len(ids)-1], nil
}

// replaceIfPresentByCheck and renameNoReplaceByCheck are the portable
// forms: a check, then a rename. Between the two another process can
// remove the file (and the rewrite would put it back) or create the
// destination (and the move would replace it). dlqctl uses them only where
// the kernel or filesystem has no atomic form.
func replaceIfPresentByCheck(tmp, path string) error {
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func renameNoReplaceByCheck(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: fs.ErrExist}
	}
	return os.Rename(from, to)
}

var _ backend.DestinationGuard = (*Queue)(nil)

// GuardDestination refuses the DLQ folder (PATH/error) and anything inside
// it, by path and, when dest exists, by identity, so that a symlink or
// another spelling of the folder is found too: a move there would put the
// entry back into the DLQ under a new name.
func (q *Queue) GuardDestination(_ context.Context, dest string) error {
	dlq := filepath.Join(q.root, errorDir)
	if within(dest, dlq) || within(dest, filepath.Join(q.root, leaseFile)) {
		return fmt.Errorf("%s is this DLQ's own folder", dest)
	}
	d, derr := os.Stat(dest)
	e, eerr := os.Stat(dlq)
	if derr == nil && eerr == nil && os.SameFile(d, e) {
		return fmt.Errorf("%s is this DLQ's own folder (%s)", dest, dlq)
	}
	if real, err := filepath.EvalSymlinks(dest); err == nil {
		if realDLQ, err := filepath.EvalSymlinks(dlq); err == nil && within(real, realDLQ) {
			return fmt.Errorf("%s is inside this DLQ's own folder (%s)", dest, dlq)
		}
	}
	return nil
}

// within reports whether path is dir or below it, both made absolute.
func within(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
