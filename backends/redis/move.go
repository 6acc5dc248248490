package redisstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
)

var (
	_ backend.Mover  = (*Stream)(nil)
	_ backend.Tailer = (*Stream)(nil)
)

// moveScriptFor is the script that moves one DLQ entry to its destination
// stream, atomically and only if it is still in the DLQ, so that a move can
// never happen twice. The stream's configuration is written into its text:
// group is the consumer group ("" when the DLQ is read through none), fp
// and rc the names of the fingerprint and redrive_count fields (the first
// name an entry has wins, as when dlqctl decodes).
//
//	KEYS[1]  the DLQ stream
//	KEYS[2]  the destination stream
//	ARGV     id, expected fingerprint, run ID, seq
//
// Replies: {"gone"} when the entry is not in the DLQ; {"changed", actual}
// when its fingerprint is not the expected one; the new entry's id when it
// was added to the destination with all its fields in their order,
// redrive_count one higher and the markers (run ID, seq, the id it was
// redriven from) replacing any earlier ones, deleted from the DLQ and
// acked in the group. Nothing is written in the first two cases.
//
// An entry without a fingerprint field is moved unverified: its planned
// fingerprint was computed with SHA-256, which Redis's Lua does not have.
//
// Every check that can fail runs before the first write, and XADD is the
// first write: Redis does not roll a script back, so a failure after it
// would leave a half-done move.
//
// It runs once per entry moved, and the server's time in it is most of a
// redrive's: the names are in the text rather than in every call's
// arguments (15 arguments a call were 4); one pass over the entry's fields
// finds the fingerprint and redrive_count and whether it carries markers
// already; the usual entry (no markers yet) keeps the table XRANGE
// returned and gets the count in place and the markers after its fields,
// and only an entry redriven before is rebuilt (in place: the write index
// never passes the read index).
func moveScriptFor(group string, fp, rc []string) *redis.Script {
	src := `
local id, want, run, seq = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local group = ` + luaString(group) + `
local fpNames = {` + luaStrings(fp) + `}
local rcNames = {` + luaStrings(rc) + `}
local mRun, mSeq, mFrom = ` + luaStrings([]string{backend.MarkerRunID, backend.MarkerSeq, backend.MarkerRedrivenFrom}) + `

local found = redis.call('XRANGE', KEYS[1], id, id)
if #found == 0 then return {'gone'} end
local fields = found[1][2]
local nf = #fields

-- One pass. Of fpNames (and of rcNames) the first one the entry has wins,
-- with its last value should it repeat: a match at rank a replaces what
-- was found when a is not larger. rcPos is where the winning redrive_count
-- name was seen last and rcN how often.
local nfp, nrc = #fpNames, #rcNames
local fpR, have = nfp, nil
local rcR, rcName, old, rcPos, rcN = nrc, nil, nil, 0, 0
local marked = false
for i = 1, nf, 2 do
  local k = fields[i]
  for a = 1, fpR do
    if k == fpNames[a] then fpR, have = a, fields[i + 1] break end
  end
  for a = 1, rcR do
    if k == rcNames[a] then
      if a < rcR or rcName == nil then rcN = 0 end
      rcR, rcName, old, rcPos, rcN = a, k, fields[i + 1], i, rcN + 1
      break
    end
  end
  if k == mRun or k == mSeq or k == mFrom then marked = true end
end

if have ~= nil and have ~= '' and have ~= want and string.lower(have) ~= string.lower(want) then
  return {'changed', have}
end

local count = 0
if rcName == nil then
  rcName = rcNames[1]
elseif old ~= '' then
  if not string.match(old, '^[+-]?%d+$') then
    return redis.error_reply('field ' .. rcName .. ' of ' .. id .. ' is not a whole number: ' .. old)
  end
  count = tonumber(old)
end
local newCount = string.format('%d', count + 1)

if group ~= '' then
  -- Fails with NOGROUP before anything is written.
  redis.call('XPENDING', KEYS[1], group, id, id, 1)
end

local n = nf
if not marked and rcN <= 1 then
  if rcN == 1 then
    fields[rcPos + 1] = newCount
  else
    fields[n + 1], fields[n + 2] = rcName, newCount
    n = n + 2
  end
else
  local rcDone = false
  n = 0
  for i = 1, nf, 2 do
    local k = fields[i]
    if k == rcName then
      fields[n + 1], fields[n + 2] = k, newCount
      n, rcDone = n + 2, true
    elseif k ~= mRun and k ~= mSeq and k ~= mFrom then
      fields[n + 1], fields[n + 2] = k, fields[i + 1]
      n = n + 2
    end
  end
  if not rcDone then
    fields[n + 1], fields[n + 2] = rcName, newCount
    n = n + 2
  end
end
fields[n + 1], fields[n + 2] = mRun, run
fields[n + 3], fields[n + 4] = mSeq, seq
fields[n + 5], fields[n + 6] = mFrom, id

local newID = redis.call('XADD', KEYS[2], '*', unpack(fields, 1, n + 6))
redis.call('XDEL', KEYS[1], id)
if group ~= '' then redis.call('XACK', KEYS[1], group, id) end
return newID
`
	return redis.NewScript(src)
}

// luaString is s as a Lua string literal: every byte as a decimal escape,
// so that no name can end the literal or change the script.
func luaString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "\\%d", s[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// luaStrings is names as a comma-separated list of Lua string literals.
func luaStrings(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = luaString(n)
	}
	return strings.Join(parts, ", ")
}

// removeScript deletes one DLQ entry if it is still there.
//
//	KEYS[1]  the DLQ stream
//	ARGV     id, group ("" for none)
//
// Replies "gone" or "ok" (deleted, and acked in the group).
var removeScript = redis.NewScript(`
local id, group = ARGV[1], ARGV[2]
if #redis.call('XRANGE', KEYS[1], id, id) == 0 then return 'gone' end
if group ~= '' then redis.call('XPENDING', KEYS[1], group, id, id, 1) end
redis.call('XDEL', KEYS[1], id)
if group ~= '' then redis.call('XACK', KEYS[1], group, id) end
return 'ok'
`)

// Atomic: the move script adds to the destination and deletes from the DLQ
// in one step. Not on a Redis Cluster, where a move across hash slots is
// two steps (cluster.go).
func (s *Stream) Atomic() bool { return !s.cluster }

// DefaultDest is the entry's origin stream.
func (s *Stream) DefaultDest(origin string) string { return origin }

// Publish moves each item with one run of moveScript, all of a chunk in one
// pipeline (one round trip). Entries that share a key keep their order: the
// server runs a pipeline's scripts in order.
//
// Redis Cluster (?cluster=true): see publishCluster. A single server that
// answers CROSSSLOT (a cluster opened without cluster=true) fails the item
// with the slots named.
func (s *Stream) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	if s.cluster {
		return s.publishCluster(ctx, items, m)
	}
	return s.publishScript(ctx, items, m)
}

// publishScript moves every item with the move script.
func (s *Stream) publishScript(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	calls := make([]scriptCall, 0, len(items))
	at := make([]int, 0, len(items))
	var runID any = m.RunID
	for i, it := range items {
		if it.Dest == "" {
			results[i].Err = fmt.Errorf("move %s: no destination stream", it.ID)
			continue
		}
		calls = append(calls, scriptCall{
			keys: []string{s.key, it.Dest},
			args: []any{it.ID, it.Fingerprint, runID, strconv.FormatInt(it.Seq, 10)},
		})
		at = append(at, i)
	}
	cmds, err := s.runScripts(ctx, s.move, calls)
	if err != nil {
		return nil, s.cmdErr(ctx, "publish", err)
	}
	for j, cmd := range cmds {
		it := items[at[j]]
		results[at[j]] = s.moveResult(it, cmd)
	}
	return results, nil
}

func (s *Stream) moveResult(it backend.MoveItem, cmd *redis.Cmd) backend.MoveResult {
	if err := cmd.Err(); err != nil {
		return backend.MoveResult{Err: s.itemErr("move "+it.ID+" to "+it.Dest, it.Dest, err)}
	}
	if newID, ok := cmd.Val().(string); ok {
		return backend.MoveResult{DestID: newID, Removed: true}
	}
	reply, err := cmd.StringSlice()
	switch {
	case err != nil:
		return backend.MoveResult{Err: fmt.Errorf("move %s: unexpected script reply %v: %w", it.ID, cmd.Val(), err)}
	case len(reply) == 1 && reply[0] == "gone":
		return backend.MoveResult{Err: fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, s)}
	case len(reply) == 2 && reply[0] == "changed":
		return backend.MoveResult{Err: fmt.Errorf("entry %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, reply[1])}
	}
	return backend.MoveResult{Err: fmt.Errorf("move %s: unexpected script reply %q", it.ID, reply)}
}

// Remove deletes each item's DLQ entry (and acks it in the group) with one
// run of removeScript, all in one pipeline.
func (s *Stream) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	calls := make([]scriptCall, len(items))
	for i, it := range items {
		calls[i] = scriptCall{keys: []string{s.key}, args: []any{it.ID, s.group}}
	}
	cmds, err := s.runScripts(ctx, removeScript, calls)
	if err != nil {
		return nil, s.cmdErr(ctx, "remove", err)
	}
	results := make([]backend.MoveResult, len(items))
	for i, cmd := range cmds {
		id := items[i].ID
		reply, err := cmd.Text()
		switch {
		case err != nil:
			results[i].Err = s.itemErr("remove "+id, "", err)
		case reply == "gone":
			results[i].Err = fmt.Errorf("entry %s: %w in %s", id, backend.ErrNotFound, s)
		case reply == "ok":
			results[i].Removed = true
		default:
			results[i].Err = fmt.Errorf("remove %s: unexpected script reply %q", id, reply)
		}
	}
	return results, nil
}

// Tail is the id of the DLQ's last entry, "" when it is empty.
func (s *Stream) Tail(ctx context.Context) (string, error) {
	msgs, err := s.rdb.XRevRangeN(ctx, s.key, "+", "-", 1).Result()
	if err != nil {
		return "", s.cmdErr(ctx, "xrevrange", err)
	}
	if len(msgs) == 0 {
		return "", nil
	}
	return msgs[0].ID, nil
}

// itemErr names what failed for one item; a CROSSSLOT reply also names
// the hash slots of the two keys.
func (s *Stream) itemErr(what, other string, err error) error {
	if redis.HasErrorPrefix(err, "CROSSSLOT") && other != "" {
		return fmt.Errorf("%s: the DLQ %q (hash slot %d) and %q (hash slot %d) are in different Redis Cluster slots, and dlqctl moves in one script: give both keys one {hash tag}, or add cluster=true to the source URL for a journaled two-step move: %w",
			what, s.key, keySlot(s.key), other, keySlot(other), err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// scriptCall is one run of a script.
type scriptCall struct {
	keys []string
	args []any
}

// runScripts runs script once per call, all in one pipeline of EVALSHA.
// Calls answered NOSCRIPT (first use on this server, SCRIPT FLUSH, a
// failover) did not run: the script is loaded and those calls sent again.
// Each returned command holds its call's reply or its own Redis error; any
// other error (connection, timeout) is returned, and then the outcome of
// every call is unknown.
func (s *Stream) runScripts(ctx context.Context, script *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	cmds := make([]*redis.Cmd, len(calls))
	if err := s.evalPipeline(ctx, script, calls, all, cmds); err != nil {
		return nil, err
	}
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		if err := script.Load(ctx, s.rdb).Err(); err != nil {
			return nil, err
		}
		if err := s.evalPipeline(ctx, script, calls, again, cmds); err != nil {
			return nil, err
		}
	}
	return cmds, nil
}

// evalPipeline sends calls[i] for each i of which in one pipeline and
// stores the commands in cmds.
func (s *Stream) evalPipeline(ctx context.Context, script *redis.Script, calls []scriptCall, which []int, cmds []*redis.Cmd) error {
	pipe := s.rdb.Pipeline()
	for _, i := range which {
		c := calls[i]
		args := make([]any, 0, 3+len(c.keys)+len(c.args))
		args = append(args, "evalsha", script.Hash(), len(c.keys))
		for _, k := range c.keys {
			args = append(args, k)
		}
		args = append(args, c.args...)
		cmds[i] = redis.NewCmd(ctx, args...)
		_ = pipe.Process(ctx, onceCmd{cmds[i]})
	}
	_, _ = pipe.Exec(ctx) // each command holds its own error
	for _, i := range which {
		if err := cmds[i].Err(); err != nil && !isServerErr(err) {
			return err
		}
	}
	return nil
}

// onceCmd is a command go-redis must not send again after a network error.
// It would retry the whole pipeline, and a move that ran before the
// connection broke would then answer "gone": the entry would read as taken
// by someone else when this very call moved it.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

// isServerErr: the server answered with an error (this command failed, the
// connection is fine).
func isServerErr(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// keySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key,
// or of its {hash tag} when it has a non-empty one, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var _ backend.DestinationGuard = (*Stream)(nil)

// GuardDestination refuses the DLQ stream itself and dlqctl's own keys
// (dlqctl:…, the lease among them): a move there would put the entry back
// into the DLQ, or overwrite what keeps one run at a time.
func (s *Stream) GuardDestination(_ context.Context, dest string) error {
	switch {
	case dest == s.key:
		return fmt.Errorf("%q is this DLQ's own stream", dest)
	case strings.HasPrefix(dest, "dlqctl:"):
		return fmt.Errorf("%q is a dlqctl bookkeeping key (dlqctl:…), not a destination", dest)
	}
	return nil
}
