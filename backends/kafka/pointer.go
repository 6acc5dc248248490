package kafkadlq

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// A share group's dead letter (KIP-1191) is, by default, only headers
// naming the record the group gave up on: the record stays on its topic.
// Such an entry is the record it names, read from there: its key, value
// and headers, followed by the dead letter's own headers (which win where
// names repeat). Its locator, time and state stay the dead letter's.
//
// Several dead letters can name one record: two share groups writing to
// one DLT, a Spring consumer of each of two groups, a redeploy that fails a
// record again. They are one move (move.go): the record goes back once,
// and each of its dead letters leaves the DLQ.

// pointerGap is the gap between two named offsets of one partition past
// which they are read separately, rather than by one read of everything
// between them.
const pointerGap = 512

// pointsAt is the record r's dead-lettering headers name,
// "topic/partition:offset", "" when they name no offset.
func pointsAt(r *kgo.Record) string {
	o, err := OriginOf(toKafkaRecord(r).Headers)
	if err != nil || o.Topic == "" || o.Partition < 0 || o.Offset < 0 {
		return ""
	}
	return o.Topic + "/" + KafkaID(o.Partition, o.Offset)
}

// pointerOnly says whether r is a share group's dead letter without a copy
// of its record: no key, no value, and only dead-lettering headers.
func pointerOnly(r *kgo.Record) bool {
	if r.Key != nil || r.Value != nil {
		return false
	}
	named := false
	for _, h := range r.Headers {
		if !DeadLetterHeader(h.Key) {
			return false
		}
		named = named || h.Key == ShareTopic
	}
	return named
}

// resolvePointers replaces each pointer-only record of recs with the
// record it names, read from its topic, under the dead letter's locator,
// time and headers. A record that cannot be read there (removed, not yet
// committed, not readable with these credentials) stays as it is, and
// decodes malformed. Records read are kept: a record at an offset never
// changes.
func (t *Topic) resolvePointers(ctx context.Context, recs []*kgo.Record) error {
	var want map[string]map[int32][]int64
	for _, r := range recs {
		if !pointerOnly(r) {
			continue
		}
		o, err := OriginOf(toKafkaRecord(r).Headers)
		if err != nil || o.Topic == "" || o.Partition < 0 || o.Offset < 0 {
			continue
		}
		if _, ok := t.pointedRecord(pointsAt(r)); ok {
			continue
		}
		if want == nil {
			want = map[string]map[int32][]int64{}
		}
		if want[o.Topic] == nil {
			want[o.Topic] = map[int32][]int64{}
		}
		want[o.Topic][o.Partition] = append(want[o.Topic][o.Partition], o.Offset)
	}
	for topic, parts := range want {
		if err := t.readPointed(ctx, topic, parts); err != nil {
			return err
		}
	}
	for i, r := range recs {
		if !pointerOnly(r) {
			continue
		}
		if src, ok := t.pointedRecord(pointsAt(r)); ok {
			out := *r
			out.Key, out.Value = src.Key, src.Value
			out.Headers = append(slices.Clip(src.Headers), r.Headers...)
			recs[i] = &out
		}
	}
	return nil
}

// pointedRecord is the record at ptr ("topic/partition:offset") once read.
func (t *Topic) pointedRecord(ptr string) (*kgo.Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.pointed[ptr]
	return r, ok
}

// readPointed reads the records at the given offsets of topic (those in
// its readable range), a run of nearby offsets at a time, and keeps them.
// Only a cancelled ctx is an error: a topic that cannot be read leaves its
// dead letters unresolved, which say so.
func (t *Topic) readPointed(ctx context.Context, topic string, want map[int32][]int64) error {
	spans, ok, err := t.spans(ctx, topic)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		t.warnPointed(topic, err)
		return nil
	}
	if !ok {
		return nil
	}
	readable := map[int32]span{}
	for _, s := range spans {
		readable[s.partition] = s
	}
	for p, offs := range want {
		s, ok := readable[p]
		if !ok {
			continue
		}
		slices.Sort(offs)
		offs = slices.Compact(offs)
		for len(offs) > 0 {
			n := 1
			for n < len(offs) && offs[n]-offs[n-1] <= pointerGap {
				n++
			}
			lo, hi := max(offs[0], s.start), min(offs[n-1]+1, s.end)
			run := offs[:n]
			offs = offs[n:]
			if lo >= hi {
				continue
			}
			err := t.readRange(ctx, topic, map[int32][2]int64{p: {lo, hi}}, func(r *kgo.Record) error {
				if _, found := slices.BinarySearch(run, r.Offset); found {
					t.mu.Lock()
					if t.pointed == nil {
						t.pointed = map[string]*kgo.Record{}
					}
					t.pointed[topic+"/"+KafkaID(p, r.Offset)] = r
					t.mu.Unlock()
				}
				return nil
			})
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				t.warnPointed(topic, err)
				return nil
			}
		}
	}
	return nil
}

// warnPointed says once on stderr why records of topic that dead letters
// name could not be read.
func (t *Topic) warnPointed(topic string, err error) {
	t.mu.Lock()
	first := !t.pointedWarned[topic]
	if t.pointedWarned == nil {
		t.pointedWarned = map[string]bool{}
	}
	t.pointedWarned[topic] = true
	t.mu.Unlock()
	if first && t.stderr != nil {
		fmt.Fprintf(t.stderr, "kafka: the records of %s that share-group dead letters name could not be read (%v): those entries are malformed\n", topic, err)
	}
}

// sameMessage is the error of an entry whose record another entry moved
// (backend.ErrSameMessage): the entry left the DLQ and nothing was sent
// for it.
type sameMessage struct {
	id, by, ptr string
}

func (e *sameMessage) Error() string {
	return fmt.Sprintf("entry %s names record %s, which entry %s moved: nothing published, entry taken out of the DLQ", e.id, e.ptr, e.by)
}

func (e *sameMessage) Is(target error) bool {
	return target == backend.ErrSameMessage || target == backend.ErrNotFound
}

// sameKey is what makes two entries one move: the record they name, its
// content (a topic deleted and made again reuses offsets) and where it
// goes.
func sameKey(ptr, fingerprint, dest string) string {
	if ptr == "" {
		return ""
	}
	return ptr + "\x00" + fingerprint + "\x00" + dest
}
