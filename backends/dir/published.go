package dirqueue

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var _ backend.PublishedChecker = (*Queue)(nil)

// CheckPublished looks in each entry's destination folder for the file a
// move of this run would have put there (same name), carrying this run's
// markers. A consumer takes files out of its inbox, so a missing file
// cannot tell: the answer is then PresenceUnknown, never PresenceAbsent.
func (q *Queue) CheckPublished(ctx context.Context, queries []backend.PublishedQuery, m backend.Markers) ([]backend.Presence, error) {
	out := make([]backend.Presence, len(queries))
	for i, qr := range queries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !safeID.MatchString(qr.Item.ID) {
			continue
		}
		dest := qr.Item.Dest
		if dest == "" {
			dest = q.DefaultDest("")
		}
		path := filepath.Join(dest, qr.Item.ID+ext)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		e := envelope.DecodeFile(qr.Item.ID, data)
		if e.Properties[backend.MarkerRunID] == m.RunID && e.Properties[backend.MarkerSeq] == strconv.FormatInt(qr.Item.Seq, 10) {
			out[i] = backend.PresenceFound
		}
	}
	return out, nil
}
