// Package raw holds the benchmark's baselines: what any Go program reading
// the same DLQ with the plain client would do at the least. It imports
// nothing from dlqctl, so that the rawredis child binary stays as small as
// a user's own program would be.
package raw

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// PageSize is the XRANGE COUNT of the raw loop, the same as dlqctl's.
const PageSize = 1000

// NewRedisClient is a plain go-redis client, configured as a user would:
// defaults, plus the two settings that stop go-redis from sending CLIENT
// SETINFO and probing for maintenance notifications on every connection
// (dlqctl sets them too).
func NewRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     addr,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

var sink byte

// RedisLoop reads the stream key with XRANGE pages of PageSize and an
// exclusive start, and per entry json.Unmarshals the payload into a map and
// computes its SHA-256. It returns the number of entries read.
func RedisLoop(ctx context.Context, rdb *redis.Client, key string) (int, error) {
	n := 0
	start := "-"
	for {
		msgs, err := rdb.XRangeN(ctx, key, start, "+", PageSize).Result()
		if err != nil {
			return n, err
		}
		for _, m := range msgs {
			p, _ := m.Values["payload"].(string)
			var doc map[string]any
			if err := json.Unmarshal([]byte(p), &doc); err != nil {
				return n, fmt.Errorf("entry %s: payload: %v", m.ID, err)
			}
			sum := sha256.Sum256([]byte(p))
			sink ^= sum[0]
			n++
		}
		if len(msgs) < PageSize {
			return n, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// RedisFloorLoop reads the stream key with XRANGE pages of PageSize and an
// exclusive start, as RedisLoop does, and does nothing with the entries:
// the floor under any reader of a Redis DLQ with go-redis (the client's
// own parsing of each reply included). It returns the number of entries
// read.
func RedisFloorLoop(ctx context.Context, rdb *redis.Client, key string) (int, error) {
	n := 0
	start := "-"
	for {
		msgs, err := rdb.XRangeN(ctx, key, start, "+", PageSize).Result()
		if err != nil {
			return n, err
		}
		n += len(msgs)
		if len(msgs) < PageSize {
			return n, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// DirLoop reads root/error/*.json: os.ReadDir, then per file os.ReadFile,
// json.Unmarshal into a map (the top level into map[string]json.RawMessage,
// then every value into `any`, so that every field is decoded once and the
// payload's bytes are at hand) and SHA-256 of the payload bytes.
func DirLoop(root string) (int, error) {
	dir := filepath.Join(root, "error")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, de := range ents {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return n, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			return n, fmt.Errorf("%s: %v", name, err)
		}
		doc := make(map[string]any, len(fields))
		for k, raw := range fields {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return n, fmt.Errorf("%s: %s: %v", name, k, err)
			}
			doc[k] = v
		}
		sum := sha256.Sum256(fields["payload"])
		sink ^= sum[0]
		n++
	}
	return n, nil
}
