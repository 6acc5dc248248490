package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// partitions is the number of partitions of topic; a topic that does not
// exist is an error naming it.
func (t *Topic) partitions(ctx context.Context, topic string) (int, error) {
	n, _, err := t.topicMeta(ctx, topic)
	return n, err
}

// span is the readable range of one partition: [start, end), end being
// the last stable offset (what read_committed can see).
type span struct {
	partition  int32
	start, end int64
	hwm        int64
}

// leaderWait bounds how long spans waits for partitions whose leader is
// not settled (a broker that just restarted answers before it leads).
const leaderWait = 30 * time.Second

// spans lists each partition's log start, last stable offset and high
// watermark, in partition order. A topic that does not exist has none
// (ok false). A partition without a leader yet is asked again, for up to
// leaderWait, saying so on Stderr after a while.
func (t *Topic) spans(ctx context.Context, topic string) ([]span, bool, error) {
	var done func()
	defer func() {
		if done != nil {
			done()
		}
	}()
	wait := 50 * time.Millisecond
	for start := time.Now(); ; {
		out, ok, err := t.spansOnce(ctx, topic)
		// A topic this Topic made (or set up) exists: not found means
		// the brokers do not know of it yet, a moment after its creation.
		unseen := err == nil && !ok && t.isMade(topic)
		if (err == nil && !unseen) || ctx.Err() != nil || time.Since(start) > leaderWait || (err != nil && !leaderless(err)) {
			return out, ok, err
		}
		if unseen {
			t.cl.PurgeTopicsFromClient(topic)
		} else if done == nil {
			done = t.slow(fmt.Sprintf("waiting for the broker to elect the leaders of %s (it restarted?)", topic))
		}
		select {
		case <-ctx.Done():
			return nil, false, t.connErr(ctx, "offsets of "+topic, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// leaderless says whether err is a partition without a settled leader.
func leaderless(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.LeaderNotAvailable) ||
		errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch) ||
		errors.Is(err, kerr.OffsetNotAvailable) || errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorLoadInProgress)
}

func (t *Topic) spansOnce(ctx context.Context, topic string) ([]span, bool, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	starts, err := t.adm.ListStartOffsets(rctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, t.connErr(ctx, "log start offsets of "+topic, err)
	}
	if len(starts[topic]) == 0 {
		return nil, false, nil
	}
	stable, err := t.adm.ListCommittedOffsets(rctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, false, t.connErr(ctx, "last stable offsets of "+topic, err)
	}
	ends, err := t.adm.ListEndOffsets(rctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, false, t.connErr(ctx, "high watermarks of "+topic, err)
	}
	var out []span
	for p, so := range starts[topic] {
		lso, _ := stable.Lookup(topic, p)
		hw, _ := ends.Lookup(topic, p)
		out = append(out, span{partition: p, start: so.Offset, end: lso.Offset, hwm: hw.Offset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].partition < out[j].partition })
	return out, true, nil
}

// reader is a client that reads the given partitions of topic directly
// (no group, nothing committed), read_committed, control records kept so
// that the end of a range is always seen.
func (t *Topic) reader(topic string, from map[int32]int64) (*kgo.Client, error) {
	return t.readerIso(topic, from, kgo.ReadCommitted())
}

// readerIso is reader with the isolation level given: the lease and claim
// records are never transactional, and read_uncommitted sees them behind
// a transaction that a crashed run left open.
func (t *Topic) readerIso(topic string, from map[int32]int64, iso kgo.IsolationLevel) (*kgo.Client, error) {
	o, err := t.baseOpts()
	if err != nil {
		return nil, err
	}
	parts := make(map[int32]kgo.Offset, len(from))
	for p, off := range from {
		parts[p] = kgo.NewOffset().At(off)
	}
	o = append(o,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxBytes(readFetchMaxBytes),
		kgo.FetchMaxPartitionBytes(readFetchMaxPartitionBytes),
	)
	return kgo.NewClient(o...)
}

// What one fetch of a reader may return, compressed. franz-go's defaults
// (50 MiB a fetch, 1 MiB a partition) let a fetch grow with the number of
// partitions a reader has, and each reader holds the fetch being decoded
// and the one franz-go reads ahead, decompressed and as records: on a wide
// DLT that alone would pass the memory a scan is bounded to (register.go),
// and with a large state topic held beside it the collector would run
// without pause.
//
// At 2 MiB a fetch, a million-record `stats` with as many state records
// peaked at 117–119 MiB instead of 119–130 MiB and took a quarter less
// CPU (docs/performance.md). The cost is more round trips on a distant
// broker: franz-go keeps one fetch in flight while the last is decoded,
// so a scan pays about one round trip per 2 MiB. A record batch larger
// than either limit is still returned whole.
const (
	readFetchMaxBytes          = 2 << 20
	readFetchMaxPartitionBytes = 512 << 10
)

// readRange calls fn for every data record of topic in each partition's
// [from, to) range, partition by partition interleaved as fetched (one
// partition's records in offset order). fn may return backend.ErrStop.
func (t *Topic) readRange(ctx context.Context, topic string, ranges map[int32][2]int64, fn func(*kgo.Record) error) error {
	return t.readRangeIso(ctx, topic, ranges, kgo.ReadCommitted(), fn)
}

// readRangeIso is readRange at the isolation level given.
func (t *Topic) readRangeIso(ctx context.Context, topic string, ranges map[int32][2]int64, iso kgo.IsolationLevel, fn func(*kgo.Record) error) error {
	return t.readRecords(ctx, topic, ranges, iso, false, fn)
}

// readRecords is readRangeIso that also hands fn the control records
// (transaction markers) when controls is set.
func (t *Topic) readRecords(ctx context.Context, topic string, ranges map[int32][2]int64, iso kgo.IsolationLevel, controls bool, fn func(*kgo.Record) error) error {
	from := map[int32]int64{}
	for p, r := range ranges {
		if r[0] < r[1] {
			from[p] = r[0]
		}
	}
	if len(from) == 0 {
		return nil
	}
	cl, err := t.readerIso(topic, from, iso)
	if err != nil {
		return err
	}
	defer cl.Close()
	left := len(from)
	done := map[int32]bool{}
	for left > 0 {
		pctx, cancel := context.WithTimeout(ctx, stateIdleTimeout+t.timeout)
		fs := cl.PollFetches(pctx)
		idle := pctx.Err() != nil && fs.NumRecords() == 0
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetchErr(fs); err != nil {
			return t.connErr(ctx, "read "+topic, err)
		}
		if idle {
			// No record within the idle timeout although the range said
			// there were more: what is left was removed (compaction).
			return nil
		}
		var stop error
		fs.EachRecord(func(r *kgo.Record) {
			if stop != nil || done[r.Partition] {
				return
			}
			end := ranges[r.Partition][1]
			if r.Offset >= end {
				done[r.Partition] = true
				left--
				return
			}
			if controls || !r.Attrs.IsControl() {
				if err := fn(r); err != nil {
					stop = err
					return
				}
			}
			if r.Offset >= end-1 {
				done[r.Partition] = true
				left--
			}
		})
		if stop != nil {
			if errors.Is(stop, backend.ErrStop) {
				return nil
			}
			return stop
		}
	}
	return nil
}

// fetchErr is the first real error of a poll (a closed client or a
// cancelled context are the caller's to report).
func fetchErr(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(topic string, p int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrClientClosed) {
			first = fmt.Errorf("partition %d: %w", p, err)
		}
	})
	return first
}
