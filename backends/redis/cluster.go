package redisstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Redis Cluster (?cluster=true).
//
// The move script touches the DLQ and the destination, so it can only run
// where both keys are in one hash slot. On a cluster a Stream therefore
// reports Atomic() == false and Publish moves each item one of two ways:
//
//   - same slot (the keys share a {hash tag}): the atomic move script, as on
//     a single server; the result says Removed, so the engine does not call
//     Remove for it.
//   - different slots: a two-step move. Publish reads the entry (XRANGE id
//     id), checks its fingerprint as the script does, and XADDs its fields
//     to the destination with redrive_count+1 and the markers; the engine
//     journals it `published` and then calls Remove (XDEL, and XACK with a
//     group, only if the entry is still there). The journal covers the gap.
//
// A resume calls Publish again for an item whose outcome was unknown. So
// that this never adds a second copy, Publish first looks for an entry in
// the destination that carries this run's dlqctl_run_id and the item's
// dlqctl_seq, and returns its id instead of adding one. It looks at the
// destination's newest entries only: back to markerScanSkew before the
// run's start (read from the run ID), and never more than markerScanMax
// entries. An entry pushed further back than that (more than markerScanMax
// newer entries added to the destination between the lost answer and the
// resume) is sent again: an ambiguous resend with the same event ID, which
// the crash-convergence rule allows and reconciliation measures.

// markerScanMax bounds how many destination entries a lookup reads.
const markerScanMax = 10000

// markerScanSkew is how far before the run's start a lookup still reads,
// for clock skew between dlqctl's host and the Redis nodes.
const markerScanSkew = time.Hour

func newClusterClient(ro *redis.Options) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                    []string{ro.Addr},
		Username:                 ro.Username,
		Password:                 ro.Password,
		TLSConfig:                ro.TLSConfig,
		ContextTimeoutEnabled:    ro.ContextTimeoutEnabled,
		DisableIdentity:          ro.DisableIdentity,
		DialerRetries:            ro.DialerRetries,
		MaxRetries:               ro.MaxRetries,
		MaintNotificationsConfig: ro.MaintNotificationsConfig,
	})
}

// Cluster reports whether the source is a Redis Cluster (?cluster=true).
func (s *Stream) Cluster() bool { return s.cluster }

// MoveNote says when moves to dest cannot be one atomic script
// (backend.MoveNoter).
func (s *Stream) MoveNote(dest string) string {
	if !s.cluster || !s.CrossSlot(dest) {
		return ""
	}
	return fmt.Sprintf("%q and the DLQ are in different hash slots: moves there take two journaled steps (add, then remove) instead of one atomic script", dest)
}

// CrossSlot reports whether a move to dest cannot be atomic: the source is
// a Redis Cluster and dest is in another hash slot than the DLQ. Such
// moves are two-step and journaled (see above); the CLI says so.
func (s *Stream) CrossSlot(dest string) bool {
	return s.cluster && keySlot(s.key) != keySlot(dest)
}

// publishCluster is Publish on a cluster: same-slot items with the move
// script in one pipeline (go-redis sends it to the node of the slot),
// then the cross-slot items one at a time, in plan order.
func (s *Stream) publishCluster(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	var same []backend.MoveItem
	var sameAt, cross []int
	for i, it := range items {
		if it.Dest != "" && s.CrossSlot(it.Dest) {
			cross = append(cross, i)
			continue
		}
		same = append(same, it)
		sameAt = append(sameAt, i)
	}
	if len(same) > 0 {
		res, err := s.publishScript(ctx, same, m)
		if err != nil {
			return nil, err
		}
		for j, r := range res {
			it := same[j]
			if r.Err != nil && isNotFound(r.Err) && it.Dest != "" {
				// A resend after an unknown outcome: the script may have
				// run the first time.
				id, err := s.findMarked(ctx, it.Dest, m.RunID, it.Seq)
				if err != nil {
					return nil, s.cmdErr(ctx, "publish", err)
				}
				if id != "" {
					r = backend.MoveResult{DestID: id, Removed: true}
				}
			}
			results[sameAt[j]] = r
		}
	}
	for _, i := range cross {
		r, err := s.publishTwoStep(ctx, items[i], m)
		if err != nil {
			return nil, s.cmdErr(ctx, "publish", err)
		}
		results[i] = r
	}
	return results, nil
}

// publishTwoStep is step 1 of a cross-slot move: the entry's fields are
// added to the destination, conditional on the entry still being in the
// DLQ with its planned fingerprint, and only once per run and item. An
// error means the outcome is unknown; item failures are in the result.
func (s *Stream) publishTwoStep(ctx context.Context, it backend.MoveItem, m backend.Markers) (backend.MoveResult, error) {
	fields, err := s.entryPairs(ctx, s.key, it.ID)
	if err != nil {
		return backend.MoveResult{}, err
	}
	if fields == nil {
		id, err := s.findMarked(ctx, it.Dest, m.RunID, it.Seq)
		if err != nil {
			return backend.MoveResult{}, err
		}
		if id != "" { // moved by this run, then removed: the move is done
			return backend.MoveResult{DestID: id, Removed: true}, nil
		}
		return backend.MoveResult{Err: fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, s)}, nil
	}
	rcName, count, itemErr, err := s.checkTwoStep(ctx, it, fields)
	if err != nil || itemErr != nil {
		return backend.MoveResult{Err: itemErr}, err
	}
	if id, err := s.findMarked(ctx, it.Dest, m.RunID, it.Seq); err != nil {
		return backend.MoveResult{}, err
	} else if id != "" {
		return backend.MoveResult{DestID: id}, nil
	}
	cmd := redis.NewCmd(ctx, twoStepArgs(it, m, fields, rcName, count)...)
	_ = s.rdb.Process(ctx, onceCmd{cmd}) // never resent: see onceCmd
	id, err := cmd.Text()
	switch {
	case err != nil && isServerErr(err):
		return backend.MoveResult{Err: fmt.Errorf("move %s to %s: %w", it.ID, it.Dest, err)}, nil
	case err != nil:
		return backend.MoveResult{}, err
	}
	return backend.MoveResult{DestID: id}, nil
}

// checkTwoStep runs publishTwoStep's checks before any write, as the move
// script does: the entry's fingerprint, its redrive_count (its name and
// value are returned) and, with a group, that the group exists. itemErr
// is why this item is not moved; err leaves the outcome unknown.
func (s *Stream) checkTwoStep(ctx context.Context, it backend.MoveItem, fields []string) (rcName string, count int64, itemErr, err error) {
	values := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		if _, ok := values[fields[i]]; !ok {
			values[fields[i]] = fields[i+1]
		}
	}
	pick := func(names []string) (string, string, bool) {
		for _, n := range names {
			if v, ok := values[n]; ok {
				return n, v, true
			}
		}
		return "", "", false
	}
	if _, have, ok := pick(s.names[envelope.FieldFingerprint]); ok && have != "" && !strings.EqualFold(have, it.Fingerprint) {
		return "", 0, fmt.Errorf("entry %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, have), nil
	}
	rcNames := s.names[envelope.FieldRedriveCount]
	rcName, old, ok := pick(rcNames)
	if !ok {
		rcName = rcNames[0]
	} else if old != "" {
		n, err := strconv.ParseInt(old, 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("move %s to %s: field %s of %s is not a whole number: %s", it.ID, it.Dest, rcName, it.ID, old), nil
		}
		count = n
	}
	if s.group != "" {
		// Fails with NOGROUP before anything is written, as the script.
		if err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: s.key, Group: s.group, Start: it.ID, End: it.ID, Count: 1}).Err(); err != nil {
			if isServerErr(err) {
				return "", 0, fmt.Errorf("move %s to %s: %w", it.ID, it.Dest, err), nil
			}
			return "", 0, nil, err
		}
	}
	return rcName, count, nil, nil
}

// twoStepArgs is the XADD of publishTwoStep: the entry's fields in their
// order, redrive_count one higher (count+1, under rcName) and the markers
// replacing any earlier ones.
func twoStepArgs(it backend.MoveItem, m backend.Markers, fields []string, rcName string, count int64) []any {
	markers := []string{
		backend.MarkerRunID, m.RunID,
		backend.MarkerSeq, strconv.FormatInt(it.Seq, 10),
		backend.MarkerRedrivenFrom, it.ID,
	}
	isMarker := map[string]bool{}
	for i := 0; i < len(markers); i += 2 {
		isMarker[markers[i]] = true
	}
	args := []any{"xadd", it.Dest, "*"}
	newCount := strconv.FormatInt(count+1, 10)
	rcDone := false
	for i := 0; i+1 < len(fields); i += 2 {
		k := fields[i]
		switch {
		case k == rcName:
			args = append(args, k, newCount)
			rcDone = true
		case !isMarker[k]:
			args = append(args, k, fields[i+1])
		}
	}
	if !rcDone {
		args = append(args, rcName, newCount)
	}
	for _, v := range markers {
		args = append(args, v)
	}
	return args
}

// entryPairs reads one entry's fields as name/value pairs in their stored
// order; nil when the entry is not there.
func (s *Stream) entryPairs(ctx context.Context, stream, id string) ([]string, error) {
	reply, err := s.rdb.Do(ctx, "xrange", stream, id, id).Slice()
	if err != nil {
		return nil, err
	}
	if len(reply) == 0 {
		return nil, nil
	}
	entry, ok := reply[0].([]any)
	if !ok || len(entry) != 2 {
		return nil, fmt.Errorf("xrange %s %s: unexpected reply %v", stream, id, reply[0])
	}
	raw, ok := entry[1].([]any)
	if !ok {
		return nil, fmt.Errorf("xrange %s %s: unexpected fields %v", stream, id, entry[1])
	}
	out := make([]string, 0, len(raw))
	for _, v := range raw {
		out = append(out, fmt.Sprint(v))
	}
	return out, nil
}

// findMarked is the id of the newest destination entry that carries the
// run's dlqctl_run_id and the item's dlqctl_seq, "" when there is none
// among the entries the bound lets it read (see markerScanMax).
func (s *Stream) findMarked(ctx context.Context, dest, runID string, seq int64) (string, error) {
	want := strconv.FormatInt(seq, 10)
	floor := "-"
	if t, ok := runStart(runID); ok {
		if ms := t.Add(-markerScanSkew).UnixMilli(); ms > 0 {
			floor = strconv.FormatInt(ms, 10)
		}
	}
	top, read := "+", 0
	for read < markerScanMax {
		page := min(1000, markerScanMax-read)
		msgs, err := s.rdb.XRevRangeN(ctx, dest, top, floor, int64(page)).Result()
		if err != nil {
			if isWrongType(err) {
				return "", nil // XADD will say so, per item
			}
			return "", err
		}
		for _, msg := range msgs {
			if msg.Values[backend.MarkerRunID] == runID && msg.Values[backend.MarkerSeq] == want {
				return msg.ID, nil
			}
		}
		read += len(msgs)
		if len(msgs) < page {
			break
		}
		top = "(" + msgs[len(msgs)-1].ID
	}
	return "", nil
}

// runStart reads the start time out of a run ID (redrive.NewRunID:
// 20060102T150405Z-random).
func runStart(runID string) (time.Time, bool) {
	stamp, _, _ := strings.Cut(runID, "-")
	t, err := time.Parse("20060102T150405Z", stamp)
	return t, err == nil
}

func isNotFound(err error) bool { return errors.Is(err, backend.ErrNotFound) }
