package redisstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
)

var (
	_ backend.Mover      = (*Stream)(nil)
	_ backend.Tailer     = (*Stream)(nil)
	_ backend.ChunkSizer = (*Stream)(nil)
)

// moveBody defines move(id, want, run, seq, dest), which moves one DLQ
// entry (KEYS[1]) to its destination stream, atomically and only if it is
// still in the DLQ, so that a move can never happen twice. The stream's
// configuration is written into its text: group is the consumer group (""
// when the DLQ is read through none), fp and rc the names of the
// fingerprint and redrive_count fields (the first name an entry has wins,
// as when dlqctl decodes).
//
// It answers {'gone'} when the entry is not in the DLQ; {'changed',
// actual} when its fingerprint is not the expected one; {'err', message}
// when a check or the add failed; the new entry's id when it was added to
// the destination with all its fields in their order, redrive_count one
// higher and the markers (run ID, seq, the id it was redriven from)
// replacing any earlier ones, deleted from the DLQ and acked in the group.
// Nothing is written but in the last case.
//
// An entry without a fingerprint field is moved unverified: its planned
// fingerprint was computed with SHA-256, which Redis's Lua does not have.
//
// Every check that can fail runs before the first write, and XADD is the
// first write: Redis does not roll a script back, so a failure after it
// would leave a half-done move. The calls before it are pcall'd, so that
// one entry's failure is that entry's answer and never stops the entries
// after it in the same script.
//
// The server's time in it is most of a redrive's: the names are in the
// text rather than in every call's arguments; one pass over the entry's
// fields finds the fingerprint and redrive_count and whether it carries
// markers already; the usual entry (no markers yet) keeps the table XRANGE
// returned and gets the count in place and the markers after its fields,
// and only an entry redriven before is rebuilt (in place: the write index
// never passes the read index).
//
// It stays one function over 80 lines: it is the text of one Lua function,
// which reads best top to bottom in the order Redis runs it.
func moveBody(group string, fp, rc []string) string {
	return `
local group = ` + luaString(group) + `
local fpNames = {` + luaStrings(fp) + `}
local rcNames = {` + luaStrings(rc) + `}
local mRun, mSeq, mFrom = ` + luaStrings([]string{backend.MarkerRunID, backend.MarkerSeq, backend.MarkerRedrivenFrom}) + `
local nfp, nrc = #fpNames, #rcNames

local function move(id, want, run, seq, dest)
local found = redis.pcall('XRANGE', KEYS[1], id, id)
if found.err then return {'err', found.err} end
if #found == 0 then return {'gone'} end
local fields = found[1][2]
local nf = #fields

-- One pass. Of fpNames (and of rcNames) the first one the entry has
-- wins, with its last value should it repeat: a match at rank a
-- replaces what was found when a is not larger. rcPos is where the
-- winning redrive_count name was seen last and rcN how often.
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
    return {'err', 'field ' .. rcName .. ' of ' .. id .. ' is not a whole number: ' .. old}
  end
  count = tonumber(old)
end
local newCount = string.format('%d', count + 1)

if group ~= '' then
  -- Fails with NOGROUP before anything is written.
  local p = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
  if p.err then return {'err', p.err} end
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

local newID = redis.pcall('XADD', dest, '*', unpack(fields, 1, n + 6))
if type(newID) == 'table' then return {'err', newID.err} end
-- After the add: an error here stops the script, and the caller then
-- takes the outcome of every entry it sent as unknown.
redis.call('XDEL', KEYS[1], id)
if group ~= '' then redis.call('XACK', KEYS[1], group, id) end
return newID
end
`
}

// moveOneScriptFor is the script that moves one entry with move (see
// moveBody); a failure is its error reply.
//
//	KEYS[1]  the DLQ stream
//	KEYS[2]  the destination stream
//	ARGV     id, expected fingerprint, run ID, seq
func moveOneScriptFor(group string, fp, rc []string) *redis.Script {
	return redis.NewScript(moveBody(group, fp, rc) + `
local r = move(ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[2])
if type(r) == 'table' and r[1] == 'err' then return redis.error_reply(r[2]) end
return r
`)
}

// moveManyScriptFor is the script that moves several entries, one after
// another in the order given, with move (see moveBody), and answers one
// reply per entry in that order.
//
//	KEYS[1]  the DLQ stream
//	KEYS[2…] the destination streams
//	ARGV     run ID, then per entry: id, expected fingerprint, seq, and
//	         the destination's index in KEYS
//
// One call per chunk rather than one per entry: most of a one-entry
// call's cost on the server (the command, the script's lookup, its
// arguments and tables) was not the move.
func moveManyScriptFor(group string, fp, rc []string) *redis.Script {
	return redis.NewScript(moveBody(group, fp, rc) + `
local run, out = ARGV[1], {}
for i = 2, #ARGV, 4 do
  out[#out + 1] = move(ARGV[i], ARGV[i + 1], run, ARGV[i + 2], KEYS[tonumber(ARGV[i + 3])])
end
return out
`)
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

// UnlimitedChunk: an unthrottled redrive sends 1,024 moves per round trip
// (four script calls) and journals them in one sync; at 256 the round
// trips and syncs, not the moves, were most of its time on a busy
// two-core host. A Redis Cluster keeps the default: its cross-slot moves
// go one at a time.
func (s *Stream) UnlimitedChunk() int {
	if s.cluster {
		return 0
	}
	return 4 * moveManyMax
}

// Atomic: the move script adds to the destination and deletes from the DLQ
// in one step. Not on a Redis Cluster, where a move across hash slots is
// two steps (cluster.go).
func (s *Stream) Atomic() bool { return !s.cluster }

// DefaultDest is the entry's origin stream.
func (s *Stream) DefaultDest(origin string) string { return origin }

// Publish moves the items in order with the move script, up to
// moveManyMax entries per call, all calls of a chunk in one pipeline (one
// round trip). Entries that share a key keep their order: the server runs
// a script's moves, and a pipeline's scripts, in order.
//
// Redis Cluster (?cluster=true): see publishCluster. A single server that
// answers CROSSSLOT (a cluster opened without cluster=true) refuses a call
// before it runs; its items are then sent one per call, and each fails
// with the slots named.
func (s *Stream) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	if s.cluster {
		return s.publishCluster(ctx, items, m)
	}
	return s.publishMany(ctx, items, m)
}

// moveManyMax bounds the moves of one script call: the server runs
// nothing else while a script runs (256 moves take a few milliseconds).
const moveManyMax = 256

// publishMany moves every item with the many-entry move script.
func (s *Stream) publishMany(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	var calls []scriptCall
	var groups [][]int // the items of each call, by index
	for i := 0; i < len(items); {
		c := scriptCall{keys: []string{s.key}, args: []any{m.RunID}}
		var at []int
		for ; i < len(items) && len(at) < moveManyMax; i++ {
			it := items[i]
			if it.Dest == "" {
				results[i].Err = fmt.Errorf("move %s: no destination stream", it.ID)
				continue
			}
			k := slices.Index(c.keys[1:], it.Dest) + 1
			if k == 0 {
				c.keys = append(c.keys, it.Dest)
				k = len(c.keys) - 1
			}
			// KEYS is 1-based in Lua.
			c.args = append(c.args, it.ID, it.Fingerprint, strconv.FormatInt(it.Seq, 10), strconv.Itoa(k+1))
			at = append(at, i)
		}
		if len(at) > 0 {
			calls, groups = append(calls, c), append(groups, at)
		}
	}
	cmds, err := s.runScripts(ctx, s.move, calls)
	if err != nil {
		return nil, s.cmdErr(ctx, "publish", err)
	}
	for j, cmd := range cmds {
		at := groups[j]
		if err := cmd.Err(); err != nil {
			if !refusedUnrun(err) {
				// The script stopped part way (a write after the add
				// failed): what it did is unknown.
				return nil, s.cmdErr(ctx, "publish", err)
			}
			// Refused before anything ran: each item's own call says
			// why (CROSSSLOT with the slots named, READONLY, OOM).
			part := make([]backend.MoveItem, len(at))
			for k, i := range at {
				part[k] = items[i]
			}
			res, err := s.publishScript(ctx, part, m)
			if err != nil {
				return nil, err
			}
			for k, i := range at {
				results[i] = res[k]
			}
			continue
		}
		replies, ok := cmd.Val().([]any)
		if !ok || len(replies) != len(at) {
			return nil, fmt.Errorf("%s: publish: the move script answered %d replies for %d entries; the outcome of each is unknown", s, len(replies), len(at))
		}
		for k, i := range at {
			results[i] = s.manyResult(items[i], replies[k])
		}
	}
	return results, nil
}

// refusedUnrun says whether a script call's error came before the script
// ran (the server refused the call), not from a command inside it.
func refusedUnrun(err error) bool {
	return !strings.Contains(err.Error(), "@user_script")
}

// manyResult is one item's result from its reply in the many-entry move
// script's answer.
func (s *Stream) manyResult(it backend.MoveItem, reply any) backend.MoveResult {
	if newID, ok := reply.(string); ok {
		return backend.MoveResult{DestID: newID, Removed: true}
	}
	parts, _ := reply.([]any)
	strs := make([]string, len(parts))
	for i, p := range parts {
		strs[i], _ = p.(string)
	}
	if len(strs) == 2 && strs[0] == "err" {
		return backend.MoveResult{Err: s.itemErr("move "+it.ID+" to "+it.Dest, it.Dest, scriptError(strs[1]))}
	}
	return s.replyResult(it, strs, reply)
}

// scriptError is an error a command inside the move script answered.
type scriptError string

func (e scriptError) Error() string { return string(e) }

// publishScript moves every item with the one-entry move script, one call
// per item, all in one pipeline.
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
	cmds, err := s.runScripts(ctx, s.moveOne, calls)
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
	if err != nil {
		return backend.MoveResult{Err: fmt.Errorf("move %s: unexpected script reply %v: %w", it.ID, cmd.Val(), err)}
	}
	return s.replyResult(it, reply, cmd.Val())
}

// replyResult reads a move's {"gone"} or {"changed", actual} reply.
func (s *Stream) replyResult(it backend.MoveItem, reply []string, raw any) backend.MoveResult {
	switch {
	case len(reply) == 1 && reply[0] == "gone":
		return backend.MoveResult{Err: fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, s)}
	case len(reply) == 2 && reply[0] == "changed":
		return backend.MoveResult{Err: fmt.Errorf("entry %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, reply[1])}
	}
	return backend.MoveResult{Err: fmt.Errorf("move %s: unexpected script reply %q", it.ID, raw)}
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

// LenTail is Len and Tail in one pipeline: one round trip between two
// batches of a redrive instead of two.
func (s *Stream) LenTail(ctx context.Context) (int64, string, error) {
	var n *redis.IntCmd
	var last *redis.XMessageSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		n = p.XLen(ctx, s.key)
		last = p.XRevRangeN(ctx, s.key, "+", "-", 1)
		return nil
	})
	switch {
	case n != nil && n.Err() != nil:
		return 0, "", s.cmdErr(ctx, "xlen", n.Err())
	case last != nil && last.Err() != nil:
		return 0, "", s.cmdErr(ctx, "xrevrange", last.Err())
	case err != nil:
		return 0, "", s.cmdErr(ctx, "xlen", err)
	}
	tail := ""
	if msgs := last.Val(); len(msgs) > 0 {
		tail = msgs[0].ID
	}
	return n.Val(), tail, nil
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
