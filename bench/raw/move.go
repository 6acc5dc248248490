package raw

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MoveChunk is how many moves the raw loop pipelines per round trip: the
// chunk dlqctl's redrive engine uses when the rate is unlimited.
const MoveChunk = 256

// MoveScript moves one entry, only if it is still in the source stream:
// XRANGE id id, XADD of its fields (in their order) to the destination,
// XDEL from the source. It answers 1 when it moved the entry, 0 when the
// entry was gone.
//
//	KEYS[1]  the source (DLQ) stream
//	KEYS[2]  the destination stream
//	ARGV[1]  the entry id
var MoveScript = redis.NewScript(`
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return 0 end
redis.call('XADD', KEYS[2], '*', unpack(found[1][2]))
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
`)

// RedisMoveLoop moves every entry of the stream key to the stream named by
// its destField field: first it reads the ids and destinations with XRANGE
// pages of PageSize (exclusive start), then it runs MoveScript once per
// entry with EVALSHA, chunk calls per pipeline (MoveChunk when 0), one pipeline at a time.
// It returns the number of entries moved and how long reading the ids
// took; an entry that was not there or a failed call is an error.
func RedisMoveLoop(ctx context.Context, rdb *redis.Client, key, destField string, chunk int) (int, time.Duration, error) {
	if chunk < 1 {
		chunk = MoveChunk
	}
	began := time.Now()
	type move struct{ id, dest string }
	var moves []move
	start := "-"
	for {
		msgs, err := rdb.XRangeN(ctx, key, start, "+", PageSize).Result()
		if err != nil {
			return 0, 0, err
		}
		for _, m := range msgs {
			dest, _ := m.Values[destField].(string)
			if dest == "" {
				return 0, 0, fmt.Errorf("entry %s: no %s field", m.ID, destField)
			}
			moves = append(moves, move{m.ID, dest})
		}
		if len(msgs) < PageSize {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	read := time.Since(began)
	if err := MoveScript.Load(ctx, rdb).Err(); err != nil {
		return 0, 0, err
	}
	sha := MoveScript.Hash()
	n := 0
	for lo := 0; lo < len(moves); lo += chunk {
		part := moves[lo:min(lo+chunk, len(moves))]
		pipe := rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(part))
		for i, m := range part {
			cmds[i] = pipe.EvalSha(ctx, sha, []string{key, m.dest}, m.id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return n, read, err
		}
		for i, c := range cmds {
			moved, err := c.Int()
			if err != nil {
				return n, read, fmt.Errorf("move %s: %v", part[i].id, err)
			}
			if moved != 1 {
				return n, read, fmt.Errorf("move %s: not in %s", part[i].id, key)
			}
			n++
		}
	}
	return n, read, nil
}
