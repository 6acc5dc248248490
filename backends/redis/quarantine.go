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

// quarantineScript moves one pending entry of a group into the DLQ as an
// envelope and acks it, if it still qualifies.
//
//	KEYS[1]  the source stream
//	KEYS[2]  the DLQ stream
//	ARGV     id, group, min idle (ms), min deliveries, the field names of
//	         origin_consumer and of attempts, then name/value pairs to set
//	         on the envelope up to the end (a field of the same name in the
//	         entry is replaced where it stands; the others are appended)
//
// Replies: {"skipped"} when the entry is no longer pending in the group, or
// no longer idle or delivered enough; {"skipped-deleted"} when it is
// pending but was deleted from the stream (it is acked, nothing added);
// {"moved", DLQ id, consumer, deliveries, idle ms}. origin_consumer and
// attempts are set from the pending entry as the script reads it, so that
// a claim between the scan and the move cannot make them stale.
var quarantineScript = redis.NewScript(`
local id, group = ARGV[1], ARGV[2]
local p = redis.call('XPENDING', KEYS[1], group, 'IDLE', ARGV[3], id, id, 1)
if #p == 0 then return {'skipped'} end
local consumer, idle, deliveries = p[1][2], p[1][3], p[1][4]
if deliveries < tonumber(ARGV[4]) then return {'skipped'} end
local found = redis.call('XRANGE', KEYS[1], id, id)
if #found == 0 then
  redis.call('XACK', KEYS[1], group, id)
  return {'skipped-deleted'}
end

local set, order = {}, {}
local function put(k, v)
  if set[k] == nil then order[#order + 1] = k end
  set[k] = v
end
for i = 7, #ARGV, 2 do put(ARGV[i], ARGV[i + 1]) end
put(ARGV[5], consumer)
put(ARGV[6], string.format('%d', deliveries))

local out, done = {}, {}
local fields = found[1][2]
for i = 1, #fields, 2 do
  local k = fields[i]
  out[#out + 1] = k
  if set[k] ~= nil then
    out[#out + 1] = set[k]
    done[k] = true
  else
    out[#out + 1] = fields[i + 1]
  end
end
for _, k in ipairs(order) do
  if not done[k] then
    out[#out + 1] = k
    out[#out + 1] = set[k]
  end
end

local dlqID = redis.call('XADD', KEYS[2], '*', unpack(out))
redis.call('XACK', KEYS[1], group, id)
return {'moved', dlqID, consumer, deliveries, idle}
`)

// Quarantine moves the pending entries of opts.Group on opts.Stream that
// are idle for at least MinIdle and delivered at least MinDeliveries times
// into the DLQ stream as envelopes, and acks them, one quarantineScript
// run each. The pending list is read a page at a time (XPENDING with
// IDLE); each page's entries are read in one pipeline and moved in one.
//
// The envelope is the entry's fields plus, under the first name of each
// field in Fields(): event_id (kept when the entry has one, else the
// stream id), fingerprint (kept, else sha256 of the payload field, computed
// here since Lua has no SHA-256; none when the entry has no payload field,
// and the envelope then reads as malformed), origin_stream, origin_group,
// origin_consumer, attempts, last_error (Reason), error_class (Category),
// dead_lettered_at (Now) and first_received_at (kept, else the time in the
// stream id).
//
// An unknown group or stream is an error wrapping backend.ErrNotFound.
func (s *Stream) Quarantine(ctx context.Context, opts QuarantineOptions) (QuarantineReport, error) {
	r := QuarantineReport{
		Stream: opts.Stream, Group: opts.Group, DLQ: s.key, DryRun: opts.DryRun,
		MinIdleSeconds: seconds(opts.MinIdle), MinDeliveries: opts.MinDeliveries,
		Moved: []QuarantinedEntry{}, WouldMove: []PendingEntry{},
	}
	switch {
	case opts.Stream == "" || opts.Group == "":
		return r, backend.Configf("quarantine: needs a stream and a group")
	case opts.Stream == s.key:
		return r, backend.Configf("quarantine: %q is the DLQ stream itself", opts.Stream)
	case opts.MinIdle < 0 || opts.MinDeliveries < 0 || opts.Limit < 0:
		return r, backend.Configf("quarantine: min idle, min deliveries and limit cannot be negative")
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	start, taken := "-", 0
	for {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		page, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: opts.Stream, Group: opts.Group, Idle: opts.MinIdle,
			Start: start, End: "+", Count: xpendingPage,
		}).Result()
		if err != nil {
			return r, s.groupErr(ctx, opts.Stream, opts.Group, "xpending", err)
		}
		var todo []redis.XPendingExt
		for _, p := range page {
			if p.RetryCount < opts.MinDeliveries {
				continue
			}
			if opts.Limit > 0 && taken == opts.Limit {
				r.Limited = true
				break
			}
			taken++
			if opts.DryRun {
				r.WouldMove = append(r.WouldMove, PendingEntry{ID: p.ID, Consumer: p.Consumer, IdleSeconds: seconds(p.Idle), Deliveries: p.RetryCount})
				continue
			}
			todo = append(todo, p)
		}
		if err := s.quarantineEntries(ctx, opts, todo, &r); err != nil {
			return r, err
		}
		if r.Limited || len(page) < xpendingPage {
			return r, nil
		}
		start = "(" + page[len(page)-1].ID
	}
}

// quarantineEntries reads the entries in one pipeline, then moves them with
// quarantineScript in another, and adds the outcomes to r.
func (s *Stream) quarantineEntries(ctx context.Context, opts QuarantineOptions, todo []redis.XPendingExt, r *QuarantineReport) error {
	if len(todo) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	reads := make([]*redis.XMessageSliceCmd, len(todo))
	for i, p := range todo {
		reads[i] = pipe.XRange(ctx, opts.Stream, p.ID, p.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.cmdErr(ctx, "xrange "+opts.Stream, err)
	}
	calls := make([]scriptCall, len(todo))
	for i, p := range todo {
		var fields map[string]string
		if msgs := reads[i].Val(); len(msgs) > 0 {
			fields = stringFields(msgs[0].Values)
		}
		// A deleted entry needs no envelope: the script only acks it.
		args := []any{p.ID, opts.Group, opts.MinIdle.Milliseconds(), opts.MinDeliveries,
			s.names[envelope.FieldOriginConsumer][0], s.names[envelope.FieldAttempts][0]}
		if fields != nil {
			args = append(args, s.envelopeFields(p.ID, fields, opts)...)
		}
		calls[i] = scriptCall{keys: []string{opts.Stream, s.key}, args: args}
	}
	cmds, err := s.runScripts(ctx, quarantineScript, calls)
	if err != nil {
		return s.cmdErr(ctx, "quarantine", err)
	}
	// Every reply is read before an error is returned, so that the report
	// holds all the entries that moved.
	var failed []error
	for i, cmd := range cmds {
		id := todo[i].ID
		reply, err := cmd.Slice()
		if err == nil && len(reply) == 0 {
			err = errors.New("empty script reply")
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", s, s.itemErr("quarantine "+id+" from "+opts.Stream, opts.Stream, err)))
			continue
		}
		switch status, _ := reply[0].(string); {
		case status == "skipped":
			r.Skipped++
		case status == "skipped-deleted":
			r.AckedDeleted++
		case status == "moved" && len(reply) == 5:
			dlqID, _ := reply[1].(string)
			consumer, _ := reply[2].(string)
			deliveries, _ := reply[3].(int64)
			idleMS, _ := reply[4].(int64)
			r.Moved = append(r.Moved, QuarantinedEntry{
				ID: id, DLQID: dlqID, Consumer: consumer, Deliveries: deliveries,
				IdleSeconds: seconds(time.Duration(idleMS) * time.Millisecond),
			})
		default:
			failed = append(failed, fmt.Errorf("%s: quarantine %s: unexpected script reply %v", s, id, reply))
		}
	}
	if len(failed) > 1 {
		return fmt.Errorf("%w (and %d more entries failed)", failed[0], len(failed)-1)
	}
	if len(failed) == 1 {
		return failed[0]
	}
	return nil
}

// envelopeFields are the name/value pairs quarantine sets on an entry
// (besides origin_consumer and attempts, which the script sets).
func (s *Stream) envelopeFields(id string, fields map[string]string, opts QuarantineOptions) []any {
	var out []any
	set := func(field, value string) {
		out = append(out, s.names[field][0], value)
	}
	has := func(field string) (string, bool) {
		for _, n := range s.names[field] {
			if v, ok := fields[n]; ok {
				return v, v != ""
			}
		}
		return "", false
	}
	if _, ok := has(envelope.FieldEventID); !ok {
		set(envelope.FieldEventID, id)
	}
	if _, ok := has(envelope.FieldFingerprint); !ok {
		for _, n := range s.names[envelope.FieldPayload] {
			if payload, ok := fields[n]; ok {
				set(envelope.FieldFingerprint, envelope.ComputeFingerprint([]byte(payload)))
				break
			}
		}
	}
	set(envelope.FieldOriginStream, opts.Stream)
	set(envelope.FieldOriginGroup, opts.Group)
	if opts.Reason != "" {
		set(envelope.FieldLastError, opts.Reason)
	}
	if opts.Category != "" {
		set(envelope.FieldErrorClass, opts.Category)
	}
	set(envelope.FieldDeadLetteredAt, opts.Now.UTC().Format(time.RFC3339Nano))
	if _, ok := has(envelope.FieldFirstReceivedAt); !ok {
		if ms, err := strconv.ParseInt(strings.SplitN(id, "-", 2)[0], 10, 64); err == nil {
			set(envelope.FieldFirstReceivedAt, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
		}
	}
	return out
}
