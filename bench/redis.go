package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/bench/raw"
)

const seedBatch = 1000

// seedStream appends n entries to key with pipelined XADD, seedBatch per
// round trip.
func seedStream(ctx context.Context, rdb *redis.Client, key string, n int, now time.Time) error {
	return seedStreamEdited(ctx, rdb, key, n, now, nil)
}

// seedStreamEdited is seedStream with edit, when not nil, applied to each
// entry before it is written.
func seedStreamEdited(ctx context.Context, rdb *redis.Client, key string, n int, now time.Time, edit func(*entry)) error {
	if err := rdb.Del(ctx, key).Err(); err != nil {
		return err
	}
	g := newGenerator(n, now)
	// One goroutine generates batches while another sends them, in order,
	// so that stream order is dead-letter order.
	batches := make(chan [][]any, 4)
	errc := make(chan error, 1)
	go func() {
		defer close(batches)
		for lo := 0; lo < n; lo += seedBatch {
			hi := min(lo+seedBatch, n)
			b := make([][]any, hi-lo)
			for i := lo; i < hi; i++ {
				e := g.entry(i)
				if edit != nil {
					edit(&e)
				}
				b[i-lo] = e.redisValues()
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		for b := range batches {
			_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, v := range b {
					p.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: "*", Values: v})
				}
				return nil
			})
			if err != nil {
				errc <- err
				for range batches {
				}
				return
			}
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("seed %s: %w", key, err)
	}
	got, err := rdb.XLen(ctx, key).Result()
	if err != nil {
		return err
	}
	if got != int64(n) {
		return fmt.Errorf("seed %s: XLEN %d, want %d", key, got, n)
	}
	return nil
}

// rawRedisResult is what one raw pass did.
type rawRedisResult struct {
	Wall   time.Duration
	CPU    time.Duration
	Count  int
	Allocs uint64
	Bytes  uint64
}

// rawRedisScan times one pass of the baseline raw.RedisLoop in this process.
func rawRedisScan(ctx context.Context, rdb *redis.Client, key string) (rawRedisResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	n, err := raw.RedisLoop(ctx, rdb, key)
	wall, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	return rawRedisResult{Wall: wall, CPU: cpu, Count: n, Allocs: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}, err
}

// rawRedisChild runs the raw loop (with args "floor": the floor loop) as a
// program of its own (bench/rawredis) under the launcher and returns its
// report.
func rawRedisChild(ctx context.Context, h helpers, addr, key string, want int, args ...string) (launched, error) {
	r, err := launch(ctx, h.launcher, os.Environ(), append([]string{h.rawredis, addr, key}, args...)...)
	if err != nil {
		return r, fmt.Errorf("raw child: %v\n%s", err, r.Stderr)
	}
	got, err := strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
	if err != nil || got != want {
		return r, fmt.Errorf("raw child read %q entries, want %d", r.Stdout, want)
	}
	return r, nil
}

// startRedis starts a redis-server of the bench's own and connects to it;
// stop closes the client, then stops the server.
func startRedis() (*redistest.Server, *redis.Client, func(), error) {
	srv, err := redistest.StartProcess()
	if err != nil {
		return nil, nil, nil, err
	}
	rdb := raw.NewRedisClient(srv.Addr())
	return srv, rdb, func() {
		rdb.Close()
		srv.Stop()
	}, nil
}
