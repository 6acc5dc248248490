// Package dirqueue is the directory queue backend (dir:PATH): the DLQ is
// PATH/error/*.json, one canonical envelope per file, and the original
// destination is PATH/inbox/. Files are always written under a temporary
// name and then linked or renamed into place, so a reader never sees half a
// file and a crash never leaves one.
package dirqueue

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/atomicfile"
)

const (
	errorDir = "error"
	inboxDir = "inbox"
	ext      = ".json"
)

// Queue is a directory queue.
type Queue struct {
	root string
	// missing: error/ did not exist when opened with OpenAllowMissing.
	missing bool
}

// MissingDLQ names the DLQ folder when it did not exist when opened ("" when
// it did): "dir:/q: folder /q/error does not exist".
func (q *Queue) MissingDLQ() string {
	if !q.missing {
		return ""
	}
	return fmt.Sprintf("%s: folder %s does not exist", q, filepath.Join(q.root, errorDir))
}

// Notice says that the DLQ folder is missing, when it is.
func (q *Queue) Notice() string {
	if q.missing {
		return fmt.Sprintf("folder %s does not exist in %s: reading it as an empty DLQ", filepath.Join(q.root, errorDir), q)
	}
	return ""
}

// Open checks that root/error exists and returns the queue.
func Open(root string) (*Queue, error) {
	return open(root, false)
}

// OpenAllowMissing is Open, except that a queue without its error/ folder
// is read as an empty DLQ and reports Missing.
func OpenAllowMissing(root string) (*Queue, error) {
	return open(root, true)
}

func open(root string, allowMissing bool) (*Queue, error) {
	if root == "" {
		return nil, backend.Configf("dir: source needs a path (dir:PATH)")
	}
	st, err := os.Stat(filepath.Join(root, errorDir))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && allowMissing {
			return &Queue{root: root, missing: true}, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, backend.Configf("dir:%s: the queue does not exist: no %s/ folder there (a directory queue keeps its DLQ in PATH/%s/)", root, errorDir, errorDir)
		}
		return nil, fmt.Errorf("dir:%s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, backend.Configf("dir:%s: %s is not a folder", root, filepath.Join(root, errorDir))
	}
	return &Queue{root: root}, nil
}

// Init creates the queue's folders (for import into a new queue).
func Init(root string) error {
	for _, d := range []string{errorDir, inboxDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (q *Queue) String() string { return "dir:" + q.root }

// Close does nothing: a directory queue holds no connection.
func (q *Queue) Close() error { return nil }

// names lists the DLQ's entry ids in order. Only the names are held, never
// the files' contents.
func (q *Queue) names() ([]string, error) {
	dir := filepath.Join(q.root, errorDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) && q.missing {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dir:%s: %w", q.root, err)
	}
	ids := make([]string, 0, len(ents))
	for _, de := range ents {
		name := de.Name()
		if strings.HasSuffix(name, ext) && !strings.HasPrefix(name, ".") {
			ids = append(ids, strings.TrimSuffix(name, ext))
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Scan reads the DLQ in file-name order, which is dead-letter order for
// files that dlqctl and the sample incident write.
func (q *Queue) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	ids, err := q.names()
	if err != nil {
		return err
	}
	start := sort.Search(len(ids), func(i int) bool { return ids[i] > after })
	for _, id := range ids[start:] {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := q.read(id)
		if errors.Is(err, backend.ErrNotFound) {
			continue // moved away since the listing: no longer in the DLQ
		}
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			if errors.Is(err, backend.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (q *Queue) path(id string) string {
	return filepath.Join(q.root, errorDir, id+ext)
}

// read decodes one file. A file that exists but cannot be read is an entry
// all the same, listed as malformed with the reason.
func (q *Queue) read(id string) (envelope.Envelope, error) {
	data, _, err := readEntry(q.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return envelope.Envelope{}, fmt.Errorf("%s: %w", id, backend.ErrNotFound)
	}
	if ne, ok := asNotEntry(err); ok {
		return envelope.Envelope{ID: id, Malformed: ne.reason}, nil
	}
	if err != nil {
		var pe *fs.PathError
		reason := err.Error()
		if errors.As(err, &pe) {
			reason = pe.Err.Error()
		}
		return envelope.Envelope{ID: id, Malformed: "unreadable file: " + reason}, nil
	}
	return envelope.DecodeFile(id, data), nil
}

var safeID = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._:@+=-]{0,200}$`)

// Get reads the entry with file name id.json.
func (q *Queue) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	if !safeID.MatchString(id) {
		return envelope.Envelope{}, fmt.Errorf("%q: %w", id, backend.ErrNotFound)
	}
	return q.read(id)
}

// Len counts the DLQ's files.
func (q *Queue) Len(ctx context.Context) (int64, error) {
	ids, err := q.names()
	return int64(len(ids)), err
}

// Import writes e as error/<id>.json. The file is written under a
// temporary name, synced, then hard-linked to its final name: the link
// fails if the name is taken, so an existing entry is never overwritten.
func (q *Queue) Import(ctx context.Context, e envelope.Envelope) (string, error) {
	id := e.ID
	if !safeID.MatchString(id) {
		return "", backend.Configf("import into dir: id %q cannot be a file name (letters, digits and ._:@+=- only)", id)
	}
	var data []byte
	if e.Malformed != "" && e.Raw != nil {
		data = e.Raw // keep a malformed entry byte for byte
	} else {
		e.Fingerprint = e.CarriedFingerprint()
		b, err := MarshalFile(e)
		if err != nil {
			return "", fmt.Errorf("import %s: %w", id, err)
		}
		data = b
	}
	if err := writeNew(filepath.Join(q.root, errorDir), id+ext, data); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("import %s: %w in %s", id, backend.ErrExists, q)
		}
		return "", fmt.Errorf("import %s: %w", id, err)
	}
	return id, nil
}

// Has reports whether error/<id>.json exists.
func (q *Queue) Has(ctx context.Context, id string) (bool, error) {
	if !safeID.MatchString(id) {
		return false, nil
	}
	_, err := os.Lstat(q.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// MarshalFile is an envelope as a directory-queue file: indented the canonical envelope form, docs/json.md JSON.
func MarshalFile(e envelope.Envelope) ([]byte, error) {
	return envelope.MarshalIndent(e)
}

// writeNew writes data to dir/name without ever replacing an existing file.
func writeNew(dir, name string, data []byte) error {
	return withTempFile(dir, name, data, nil, func(tmp string) error {
		if err := os.Link(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
		return atomicfile.SyncDir(dir)
	})
}

// newFileMode is the mode of a file dlqctl creates from nothing (import):
// what a file written under the usual umask 022 gets, so that a consumer
// running as another user can read it. A temporary file would be 0600.
const newFileMode = 0o644

// withTempFile writes data to a synced temporary file in dir, hands its
// name to place (which links or renames it into position), and removes
// whatever is left under the temporary name. The file gets the mode and,
// where the process may, the owner of like (the file it replaces), or
// newFileMode when like is nil.
func withTempFile(dir, name string, data []byte, like fs.FileInfo, place func(tmp string) error) error {
	tmp, err := os.CreateTemp(dir, ".tmp-"+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	mode := fs.FileMode(newFileMode)
	if like != nil {
		mode = like.Mode().Perm()
		keepOwner(tmp.Name(), like)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
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
	return place(tmp.Name())
}
