package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchMany is fetchRaw with each share-group dead letter rebuilt from its
// source record (rebuildShare): every reader of entries by locator (get,
// move, identity checks) sees the same record a scan does.
func (t *Topic) fetchMany(ctx context.Context, want map[int32][]int64) (map[string]*kgo.Record, error) {
	out, err := t.fetchRaw(ctx, want)
	if err != nil || len(out) == 0 {
		return out, err
	}
	ids := make([]string, 0, len(out))
	recs := make([]*kgo.Record, 0, len(out))
	for id, r := range out {
		ids, recs = append(ids, id), append(recs, r)
	}
	if err := t.rebuild(ctx, recs, true); err != nil {
		return nil, err
	}
	for i, id := range ids {
		out[id] = recs[i]
	}
	return out, nil
}

// shareSource is a share-group dead letter's source record, to read back.
type shareSource struct {
	topic     string
	partition int32
	offset    int64
}

// shareSourceOf says where a share-group dead letter's record was
// consumed from; ok is false for any other record, and for one whose
// headers name no whole place.
func shareSourceOf(r *kgo.Record) (shareSource, bool) {
	found := false
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, SharePrefix) || strings.HasPrefix(h.Key, ShareDraftPrefix) {
			found = true
		}
		if h.Key == SourceGoneHeader {
			return shareSource{}, false // already tried
		}
	}
	if !found {
		return shareSource{}, false
	}
	s, ok, err := shareDeadLetterOf(toKafkaRecord(r).Headers)
	if !ok || err != nil || s.Partition < 0 || s.Offset < 0 {
		return shareSource{}, false
	}
	return shareSource{s.Topic, s.Partition, s.Offset}, true
}

// rebuildShare replaces, in recs, each share-group dead letter by the
// record it stands for: the source record's key, value and headers, then
// the dead letter's own headers, at the dead letter's place and time. The
// broker writes no key and no value by default, and no headers of the
// record even when it copies: without the source, a dead letter has no
// event ID and nothing to redrive. When the source no longer holds the
// record, the dead letter gets a SourceGoneHeader saying why: a
// header-only one decodes as malformed, a copied one stands on its copy.
// Records are replaced, never changed: the read-ahead cache holds them.
func (t *Topic) rebuildShare(ctx context.Context, recs []*kgo.Record) error {
	return t.rebuild(ctx, recs, false)
}

// rebuild is rebuildShare; with sure, a source record the read did not
// find where it should be (past the partition's end, or missing from a
// read that went idle) is an error rather than a verdict: a move and the
// checks before it must not take a broker that has not caught up (one
// that just restarted) for a source that lost the record, and skip the
// entry as changed.
func (t *Topic) rebuild(ctx context.Context, recs []*kgo.Record, sure bool) error {
	want := map[string]map[int32][]int{} // topic → partition → indexes into recs
	srcOf := map[int]shareSource{}
	for i, r := range recs {
		s, ok := shareSourceOf(r)
		if !ok {
			continue
		}
		srcOf[i] = s
		if want[s.topic] == nil {
			want[s.topic] = map[int32][]int{}
		}
		want[s.topic][s.partition] = append(want[s.topic][s.partition], i)
	}
	for topic, parts := range want {
		found, gone, unsure, err := t.readSources(ctx, topic, parts, srcOf)
		if err != nil {
			return err
		}
		for k := range unsure {
			if sure {
				return fmt.Errorf("kafka: read back the source record %s/%d:%d of a share-group dead letter: %s; the broker may not have caught up (a restart): nothing decided, try again",
					topic, k.partition, k.offset, gone[k])
			}
		}
		for _, idx := range parts {
			for _, i := range idx {
				o := srcOf[i].offset
				if src, ok := found[shareKey{srcOf[i].partition, o}]; ok {
					if len(recs[i].Key) == 0 && len(recs[i].Value) == 0 {
						t.noteHeld(src)
					}
					recs[i] = rebuilt(recs[i], src)
				} else if why := gone[shareKey{srcOf[i].partition, o}]; why != "" {
					recs[i] = withHeader(recs[i], SourceGoneHeader, why)
				}
			}
		}
	}
	return nil
}

type shareKey struct {
	partition int32
	offset    int64
}

// readSources reads the source records that parts (indexes into the
// records srcOf describes) need from topic, one range per partition, and
// says why each one it could not read is gone; unsure are those whose
// reason a broker that has not caught up would give as well (past the
// end, not found). A read the broker refuses for permission is a reason,
// not an error: the entries say so.
func (t *Topic) readSources(ctx context.Context, topic string, parts map[int32][]int, srcOf map[int]shareSource) (found map[shareKey]*kgo.Record, gone map[shareKey]string, unsure map[shareKey]bool, err error) {
	found, gone, unsure = map[shareKey]*kgo.Record{}, map[shareKey]string{}, map[shareKey]bool{}
	goneAll := func(why string) {
		for p, idx := range parts {
			for _, i := range idx {
				gone[shareKey{p, srcOf[i].offset}] = why
			}
		}
	}
	spans, ok, err := t.spans(ctx, topic)
	switch {
	case refused(err):
		goneAll(fmt.Sprintf("no permission to read topic %s", topic))
		return found, gone, unsure, nil
	case err != nil:
		return nil, nil, nil, err
	case !ok:
		goneAll(fmt.Sprintf("topic %s no longer exists", topic))
		return found, gone, unsure, nil
	}
	byPart := map[int32]span{}
	for _, s := range spans {
		byPart[s.partition] = s
	}
	ranges, wanted := map[int32][2]int64{}, map[shareKey]bool{}
	for p, idx := range parts {
		s, ok := byPart[p]
		for _, i := range idx {
			o, k := srcOf[i].offset, shareKey{p, srcOf[i].offset}
			switch {
			case !ok:
				gone[k] = fmt.Sprintf("partition %d of topic %s no longer exists", p, topic)
			case o < s.start:
				gone[k] = fmt.Sprintf("offset %d is below log start %d of %s/%d", o, s.start, topic, p)
			case o >= s.end:
				gone[k] = fmt.Sprintf("offset %d is past the end (%d) of %s/%d", o, s.end, topic, p)
				unsure[k] = true
			default:
				wanted[k] = true
				r, seen := ranges[p]
				if !seen {
					r = [2]int64{o, o + 1}
				}
				ranges[p] = [2]int64{min(r[0], o), max(r[1], o+1)}
			}
		}
	}
	err = t.readRange(ctx, topic, ranges, func(r *kgo.Record) error {
		if k := (shareKey{r.Partition, r.Offset}); wanted[k] {
			found[k] = r
		}
		return nil
	})
	switch {
	case refused(err):
		for k := range wanted {
			gone[k] = fmt.Sprintf("no permission to read topic %s", topic)
		}
		return found, gone, unsure, nil
	case err != nil:
		return nil, nil, nil, err
	}
	for k := range wanted {
		if found[k] == nil {
			gone[k] = fmt.Sprintf("offset %d of %s/%d is no longer in the log (compacted away)", k.offset, topic, k.partition)
			unsure[k] = true
		}
	}
	return found, gone, unsure, nil
}

// refused says whether err is the broker refusing a read for permission.
func refused(err error) bool {
	return err != nil && (errors.Is(err, kerr.TopicAuthorizationFailed) || strings.Contains(err.Error(), kerr.TopicAuthorizationFailed.Message))
}

// rebuilt is dead letter dl carrying the source record src.
func rebuilt(dl, src *kgo.Record) *kgo.Record {
	nr := *dl
	nr.Key, nr.Value = src.Key, src.Value
	nr.Headers = make([]kgo.RecordHeader, 0, len(src.Headers)+len(dl.Headers))
	for _, h := range src.Headers {
		if !DeadLetterHeader(h.Key) {
			nr.Headers = append(nr.Headers, h)
		}
	}
	nr.Headers = append(nr.Headers, dl.Headers...)
	return &nr
}

// withHeader is r with one more header.
func withHeader(r *kgo.Record, key, value string) *kgo.Record {
	nr := *r
	nr.Headers = append(append(make([]kgo.RecordHeader, 0, len(r.Headers)+1), r.Headers...), kgo.RecordHeader{Key: key, Value: []byte(value)})
	return &nr
}
