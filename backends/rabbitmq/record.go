package rabbitmq

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The removal record: what dlqctl removed from the DLQ, kept where the
// broker cannot lose it.
//
// An ack on a classic or quorum queue is not durable when the broker
// confirms it: the channel's close-ok says the broker has the acks, not
// that it wrote them. A classic queue writes them to its index once idle
// (measured on 3.10.8: a SIGKILL 100 ms after the acks brought all 100
// messages back, 200 ms after none), a quorum queue much later (67 of 100
// came back after a SIGKILL 15 s after the acks). A redriven message that
// comes back would be planned and moved a second time. And a stream DLQ
// cannot delete a message at all.
//
// So before dlqctl acks (or, on a stream, instead of acking) it records
// the removed entries in a durable classic queue of its own,
// dlqctl.removed.<DLQ>, as persistent messages with publisher confirms:
// a classic queue confirms a persistent message once it is on disk, and
// such a message survives a SIGKILL of the broker (measured). Streams
// and quorum queues are no place for it: on 3.10.8 a stream or quorum
// queue declared moments before a SIGKILL was gone after the restart,
// confirmed messages and all (the stream coordinator's log was lost). Every
// read treats what the record holds as gone.
//
// Each message (a page) carries an HMAC under a key that dlqctl keeps as
// the one message of dlqctl.removed.<DLQ>.key, a classic queue of length
// one that refuses further publishes (x-overflow reject-publish): nobody
// can replace the key by publishing, so a page published by anyone but
// dlqctl counts for nothing. Whoever can consume dlqctl's queues can read
// the key, as they could consume the DLQ itself.
//
// The run that holds the DLQ's lease keeps the record small: when it
// starts writing, it writes the entries still needed as new pages and
// acks the old ones (and any page dlqctl did not write), so the record
// follows what it must remember, not how much was ever removed. A crash
// between the two leaves some entries twice, which changes nothing.
//
// An entry of a classic or quorum DLQ names a message by its content
// (the identity hash of its id) and, among byte-identical copies, by its
// rank: copies are interchangeable, so the record keeps, per content, the
// most copies dlqctl saw in the DLQ before removing one (total) and the
// ranks it removed. A read gives the copies it finds the ranks not
// removed, in order; copies beyond total minus the removed ones came
// back after a restart (a lost ack) and are hidden, up to the number of
// entries written before it (see copyRanks). Ids so stay what they were
// while copies leave one by one. An entry of a
// stream DLQ is an offset, with the content's identity so that a stream
// deleted and re-created (offsets start again at 0) is not hidden.
//
// Each queue-shape entry also names the broker epoch it was written in
// (see epoch.go): only a restart of the broker can show that an ack was
// written, and an entry is dropped only once a restart came after it and
// no copy of its content is left in the DLQ.

const (
	recordVersion = "dlqctl-record/v1"

	hRecKind  = "dlqctl-record"
	hRecRun   = "dlqctl-run"
	hRecEpoch = "dlqctl-epoch"
	hRecShape = "dlqctl-shape"
	hRecMAC   = "dlqctl-mac"

	kindEntries = "entries"

	shapeQueue  = "queue"  // classic or quorum: entries by content and rank
	shapeStream = "stream" // entries by offset

	baseLen = 12 // bytes of an identity hash in an entry
	keyLen  = 32
	macLen  = 16
	// pageEntries bounds the entries of one page (a stream message).
	pageEntries = 2048
)

// base is the content part of an entry id: the identity hash.
type base [baseLen]byte

func (b base) String() string { return hex.EncodeToString(b[:]) }

// splitID reads an entry id of a classic or quorum DLQ: the identity hash
// and, after a dash, the rank among identical copies (1 without one).
func splitID(id string) (base, int64, bool) {
	h, r, dashed := strings.Cut(id, "-")
	var b base
	if len(h) != 2*baseLen {
		return b, 0, false
	}
	if _, err := hex.Decode(b[:], []byte(h)); err != nil {
		return b, 0, false
	}
	rank := int64(1)
	if dashed {
		n, err := strconv.ParseInt(r, 10, 64)
		if err != nil || n < 2 {
			return b, 0, false
		}
		rank = n
	}
	return b, rank, true
}

// rankedID is the id of the copy of b at rank (1: the hash alone).
func rankedID(b base, rank int64) string {
	if rank <= 1 {
		return b.String()
	}
	return b.String() + "-" + strconv.FormatInt(rank, 10)
}

// removal is one entry of the record. Queue shape: the content b, the
// most copies of it in the DLQ before a removal (n) and the rank removed.
// Stream shape: the content b at offset n.
type removal struct {
	b    base
	n    int64
	rank int64
}

// page is one message of the record: entries written by run in epoch.
type page struct {
	run, epoch string
	shape      string
	entries    []removal
}

// mac is the page's HMAC under key, bound to the DLQ (vhost and queue).
func (p *page) mac(key []byte, dlq string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, s := range []string{recordVersion, dlq, kindEntries, p.run, p.epoch, p.shape} {
		m.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	m.Write(body)
	return m.Sum(nil)[:macLen]
}

// encode is the page as a persistent message, its MAC under key.
func (p *page) encode(key []byte, dlq string) amqp.Publishing {
	body := encodeEntries(p.shape, p.entries)
	h := amqp.Table{hRecKind: kindEntries, hRecRun: p.run, hRecEpoch: p.epoch, hRecShape: p.shape,
		hRecMAC: hex.EncodeToString(p.mac(key, dlq, body))}
	return amqp.Publishing{Headers: h, Body: body, DeliveryMode: amqp.Persistent, ContentType: "application/octet-stream"}
}

func encodeEntries(shape string, es []removal) []byte {
	out := make([]byte, 0, len(es)*(baseLen+6))
	for _, e := range es {
		out = append(out, e.b[:]...)
		out = binary.AppendUvarint(out, uint64(e.n))
		if shape == shapeQueue {
			out = binary.AppendUvarint(out, uint64(e.rank))
		}
	}
	return out
}

var errForged = errors.New("not written by dlqctl (no valid MAC)")

// decodePage reads a record message; one whose MAC does not check under
// key is errForged.
func decodePage(d *amqp.Delivery, key []byte, dlq string) (page, error) {
	var p page
	kind, _ := d.Headers[hRecKind].(string)
	mac, ok := d.Headers[hRecMAC].(string)
	p.run, _ = d.Headers[hRecRun].(string)
	p.epoch, _ = d.Headers[hRecEpoch].(string)
	p.shape, _ = d.Headers[hRecShape].(string)
	if kind != kindEntries || !ok || len(key) != keyLen {
		return p, errForged
	}
	want, err := hex.DecodeString(mac)
	if err != nil || !hmac.Equal(want, p.mac(key, dlq, d.Body)) {
		return p, errForged
	}
	if p.entries, err = decodeEntries(p.shape, d.Body); err != nil {
		return p, err
	}
	return p, nil
}

func decodeEntries(shape string, b []byte) ([]removal, error) {
	var out []removal
	for len(b) > 0 {
		var e removal
		if len(b) < baseLen {
			return nil, errors.New("record page: a truncated entry")
		}
		copy(e.b[:], b)
		b = b[baseLen:]
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("record page: a bad entry")
		}
		e.n, b = int64(n), b[k:]
		if shape == shapeQueue {
			r, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, errors.New("record page: a bad entry")
			}
			e.rank, b = int64(r), b[k:]
		}
		out = append(out, e)
	}
	return out, nil
}

// removedSet is what a record says was removed.
type removedSet struct {
	shape string
	// epoch is the broker's current epoch ("" none: every entry was
	// written before a restart).
	epoch string
	// bases: queue shape, by content.
	bases map[base]*baseRemovals
	// offsets: stream shape, the content at each removed offset.
	offsets map[int64]base
}

// baseRemovals is what was removed of one content: total is the most
// copies dlqctl saw in the DLQ before one of its removals, ranks the
// ranks removed, each with the epoch of its latest entry.
type baseRemovals struct {
	total int64
	ranks map[int64]string
}

func newRemovedSet(shape string) *removedSet {
	return &removedSet{shape: shape, bases: map[base]*baseRemovals{}, offsets: map[int64]base{}}
}

// add takes in a page's entries.
func (s *removedSet) add(epoch string, es []removal) {
	for _, e := range es {
		if s.shape == shapeStream {
			s.offsets[e.n] = e.b
			continue
		}
		br := s.bases[e.b]
		if br == nil {
			br = &baseRemovals{ranks: map[int64]string{}}
			s.bases[e.b] = br
		}
		br.total = max(br.total, e.n)
		br.ranks[e.rank] = epoch
	}
}

// size is the number of entries.
func (s *removedSet) size() int {
	n := len(s.offsets)
	for _, br := range s.bases {
		n += len(br.ranks)
	}
	return n
}

// pages are s as record pages, one epoch per page.
func (s *removedSet) pages() []page {
	byEpoch := map[string][]removal{}
	for off, b := range s.offsets {
		byEpoch[""] = append(byEpoch[""], removal{b: b, n: off})
	}
	for b, br := range s.bases {
		for r, ep := range br.ranks {
			byEpoch[ep] = append(byEpoch[ep], removal{b: b, n: br.total, rank: r})
		}
	}
	var out []page
	for _, ep := range sortedKeys(byEpoch) {
		es := byEpoch[ep]
		for len(es) > 0 {
			n := min(len(es), pageEntries)
			out = append(out, page{epoch: ep, shape: s.shape, entries: es[:n]})
			es = es[n:]
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// copyRanks gives the copies of one content their ids as a read meets
// them, in queue order, and says which are hidden: removed by dlqctl
// before the broker's last restart, yet back in the queue (the restart
// lost the ack).
type copyRanks struct {
	set  *removedSet
	seen map[base]int64
}

// next is the id of the next copy of b, or hidden. Copies keep their
// ranks as others leave: the first ones take the ranks not removed, in
// order (total less the removed copies are expected); copies beyond come
// back from before a restart (hidden, as many as entries crossed one), or
// are there still or again (an ack that failed within this epoch, the
// same content dead-lettered anew) and take the removed ranks, then
// ranks past total.
func (c *copyRanks) next(b base) (id string, hidden bool) {
	c.seen[b]++
	k := c.seen[b]
	var br *baseRemovals
	if c.set != nil {
		br = c.set.bases[b]
	}
	if br == nil {
		return rankedID(b, k), false
	}
	removed := sortedRanks(br)
	expected := max(br.total-int64(len(removed)), 0)
	if k <= expected {
		return rankedID(b, freeRank(br, k)), false
	}
	j := k - expected
	crossed := int64(0)
	for _, ep := range br.ranks {
		if ep != c.set.epoch || ep == "" {
			crossed++
		}
	}
	if j <= crossed {
		return rankedID(b, removed[j-1]), true
	}
	if j -= crossed; j <= int64(len(removed)) {
		return rankedID(b, removed[j-1]), false
	}
	return rankedID(b, max(br.total, int64(len(removed)))+j-int64(len(removed))), false
}

// freeRank is the kth rank (1-based) of 1… that br has not removed.
func freeRank(br *baseRemovals, k int64) int64 {
	for r := int64(1); ; r++ {
		if _, gone := br.ranks[r]; !gone {
			if k--; k == 0 {
				return r
			}
		}
	}
}

// sortedRanks are the ranks br removed, ascending.
func sortedRanks(br *baseRemovals) []int64 {
	rs := make([]int64, 0, len(br.ranks))
	for r := range br.ranks {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// hiddenRank is a rank br removed before the epoch, for the entry that
// records a copy that came back removed again (a re-ack).
func hiddenRank(br *baseRemovals, epoch string) int64 {
	for _, r := range sortedRanks(br) {
		if ep := br.ranks[r]; ep != epoch || ep == "" {
			return r
		}
	}
	return 1
}

// String is a short account, for errors.
func (s *removedSet) String() string {
	return fmt.Sprintf("%d removal entries", s.size())
}
