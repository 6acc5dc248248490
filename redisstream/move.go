package redisstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var (
	_ backend.Mover  = (*Stream)(nil)
	_ backend.Tailer = (*Stream)(nil)
)

// moveScript moves one DLQ entry to its destination stream, atomically and
// only if it is still in the DLQ, so that a move can never happen twice.
//
//	KEYS[1]  the DLQ stream
//	KEYS[2]  the destination stream
//	ARGV     id, expected fingerprint, group ("" when the DLQ is read
//	         through none), then n and the n names of the fingerprint
//	         field, then m and the m names of the redrive_count field
//	         (first present name wins, as when dlqctl decodes), then the
//	         marker fields as name/value pairs up to the end
//
// Replies: {"gone"} when the entry is not in the DLQ; {"changed", actual}
// when its fingerprint is not the expected one; {"ok", new id} when it was
// added to the destination with all its fields in their order, redrive_count
// one higher and the markers replacing any earlier ones, deleted from the
// DLQ and acked in the group. Nothing is written in the first two cases.
//
// An entry without a fingerprint field is moved unverified: its planned
// fingerprint was computed with SHA-256, which Redis's Lua does not have.
//
// Every check that can fail runs before the first write, and XADD is the
// first write: Redis does not roll a script back, so a failure after it
// would leave a half-done move.
//
// It runs once per entry moved, so it makes as few Lua tables as it can:
// the names are read from ARGV where they are, and the new entry is built
// in place in the table XRANGE returned (the write index never passes the
// read index). That took a fifth to a third off its server time per call,
// which is most of a redrive's time on the server.
var moveScript = redis.NewScript(`
local id, want, group = ARGV[1], ARGV[2], ARGV[3]
local rcAt = 5 + tonumber(ARGV[4])
local mAt = rcAt + tonumber(ARGV[rcAt]) + 1

local found = redis.call('XRANGE', KEYS[1], id, id)
if #found == 0 then return {'gone'} end
local fields = found[1][2]
local nf = #fields
-- The first of the names ARGV[from..to] that the entry has, and its value
-- (the last one, should a name repeat).
local function pick(from, to)
  for a = from, to do
    local name, v = ARGV[a], nil
    for i = 1, nf, 2 do
      if fields[i] == name then v = fields[i + 1] end
    end
    if v ~= nil then return name, v end
  end
end

local _, have = pick(5, rcAt - 1)
if have ~= nil and have ~= '' and have ~= want and string.lower(have) ~= string.lower(want) then
  return {'changed', have}
end

local rcName, old = pick(rcAt + 1, mAt - 1)
local count = 0
if rcName == nil then
  rcName = ARGV[rcAt + 1]
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

local marker = {}
for i = mAt, #ARGV, 2 do marker[ARGV[i]] = true end
local n, rcDone = 0, false
for i = 1, nf, 2 do
  local k = fields[i]
  if k == rcName then
    fields[n + 1], fields[n + 2] = k, newCount
    n, rcDone = n + 2, true
  elseif not marker[k] then
    fields[n + 1], fields[n + 2] = k, fields[i + 1]
    n = n + 2
  end
end
if not rcDone then
  fields[n + 1], fields[n + 2] = rcName, newCount
  n = n + 2
end
for i = mAt, #ARGV do
  n = n + 1
  fields[n] = ARGV[i]
end

local newID = redis.call('XADD', KEYS[2], '*', unpack(fields, 1, n))
redis.call('XDEL', KEYS[1], id)
if group ~= '' then redis.call('XACK', KEYS[1], group, id) end
return {'ok', newID}
`)

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
	// What every call of the chunk shares, made once: the group and the
	// field names.
	common := appendNames([]any{s.group}, s.names[envelope.FieldFingerprint])
	common = appendNames(common, s.names[envelope.FieldRedriveCount])
	var runID any = m.RunID
	for i, it := range items {
		if it.Dest == "" {
			results[i].Err = fmt.Errorf("move %s: no destination stream", it.ID)
			continue
		}
		var id any = it.ID
		args := make([]any, 0, 2+len(common)+6)
		args = append(args, id, it.Fingerprint)
		args = append(args, common...)
		args = append(args,
			backend.MarkerRunID, runID,
			backend.MarkerSeq, strconv.FormatInt(it.Seq, 10),
			backend.MarkerRedrivenFrom, id)
		calls = append(calls, scriptCall{keys: []string{s.key, it.Dest}, args: args})
		at = append(at, i)
	}
	cmds, err := s.runScripts(ctx, moveScript, calls)
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
	reply, err := cmd.StringSlice()
	switch {
	case err != nil:
		return backend.MoveResult{Err: s.itemErr("move "+it.ID+" to "+it.Dest, it.Dest, err)}
	case len(reply) == 1 && reply[0] == "gone":
		return backend.MoveResult{Err: fmt.Errorf("entry %s: %w in %s", it.ID, backend.ErrNotFound, s)}
	case len(reply) == 2 && reply[0] == "changed":
		return backend.MoveResult{Err: fmt.Errorf("entry %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, reply[1])}
	case len(reply) == 2 && reply[0] == "ok":
		return backend.MoveResult{DestID: reply[1], Removed: true}
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

// appendNames adds a count and the names to script arguments.
func appendNames(args []any, names []string) []any {
	args = append(args, len(names))
	for _, n := range names {
		args = append(args, n)
	}
	return args
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
