package sqsdlq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A scan must hold every message it received until the end (SQS has no
// peek: releasing one early lets the next receive hand it out again), and
// must hand them over in dead-letter order, known only once all are in.
// Keeping them whole made a scan's memory grow with the DLQ. scanStore
// keeps in memory only each message's order key and where it is in a
// temporary file, and its receipt handle — those, past handleBound, in a
// second temporary file. Both files are unlinked as soon as they are
// created (mode 0600), so nothing is left on disk after a crash.

// handleBound is how many receipt handles a scan keeps in memory before
// it spills the rest to its temporary file.
const handleBound = 4096

// scanEntry is one message of a scan: its order key (sortKey's, with its
// strings in the store's keys) and its place in the message file. 40
// bytes: a sortKey and a string header for each of its strings were 80,
// and each id's own allocation 48 more.
type scanEntry struct {
	sent, groupFirst int64
	off              int64
	// key is where the message's id, then its group and sequence number
	// (FIFO), start in the store's keys; idLen, groupLen and seqLen are
	// their lengths (SQS allows 100, 128 and 40 bytes).
	key                     int64
	n                       int32
	idLen, groupLen, seqLen uint8
}

// spilled is a stored message: what decode needs.
type spilled struct {
	ID    string                 `json:"i"`
	Body  string                 `json:"b"`
	Attrs map[string]string      `json:"a,omitempty"`
	Msg   map[string]spilledAttr `json:"m,omitempty"`
}

type spilledAttr struct {
	Type string  `json:"t"`
	Str  *string `json:"s,omitempty"`
	Bin  []byte  `json:"b,omitempty"`
}

type scanStore struct {
	mu      sync.Mutex
	msgs    *os.File
	mw      *bufio.Writer
	moff    int64
	index   []scanEntry
	keys    []byte // the order keys' strings, one after another
	handles *handleStore
	err     error
}

func newScanStore(bound int) (*scanStore, error) {
	f, err := tempFile("dlqctl-sqs-scan-")
	if err != nil {
		return nil, err
	}
	return &scanStore{msgs: f, mw: bufio.NewWriterSize(f, 64<<10), handles: &handleStore{bound: bound}}, nil
}

// tempFile creates a temporary file readable only by this user and
// unlinks it at once: it lives while it is open.
func tempFile(prefix string) (*os.File, error) {
	f, err := os.CreateTemp("", prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	return f, nil
}

// add keeps a received batch: every receipt handle and every message. A
// message received twice (its visibility ran out) has both handles kept
// (the older one is stale, and releasing it does nothing) and is stored
// twice; seal keeps one. It returns the range of handles added.
func (s *scanStore) add(msgs []types.Message) (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.handles.len()
	for _, m := range msgs {
		// Clones: the SDK's strings may share memory with the whole
		// answer, which keeping one of them would keep alive.
		if err := s.handles.add(strings.Clone(aws.ToString(m.ReceiptHandle))); err != nil && s.err == nil {
			s.err = err
		}
		id := aws.ToString(m.MessageId)
		sp := spilled{ID: id, Body: aws.ToString(m.Body), Attrs: m.Attributes}
		if len(m.MessageAttributes) > 0 {
			sp.Msg = make(map[string]spilledAttr, len(m.MessageAttributes))
			for k, v := range m.MessageAttributes {
				sp.Msg[k] = spilledAttr{Type: aws.ToString(v.DataType), Str: v.StringValue, Bin: v.BinaryValue}
			}
		}
		b, err := json.Marshal(sp)
		if err == nil {
			_, err = s.mw.Write(b)
		}
		if err != nil {
			if s.err == nil {
				s.err = fmt.Errorf("sqs scan: temporary file: %w", err)
			}
			continue
		}
		key := keyOf(m)
		if len(key.id) > 255 || len(key.group) > 255 || len(key.seq) > 255 {
			if s.err == nil {
				s.err = fmt.Errorf("sqs scan: message %.40q: id, group or sequence number longer than SQS allows", key.id)
			}
			continue
		}
		e := scanEntry{sent: key.sent, off: s.moff, n: int32(len(b)), key: int64(len(s.keys)),
			idLen: uint8(len(key.id)), groupLen: uint8(len(key.group)), seqLen: uint8(len(key.seq))}
		s.keys = append(append(append(s.keys, key.id...), key.group...), key.seq...)
		s.index = append(s.index, e)
		s.moff += int64(len(b))
	}
	return start, s.handles.len()
}

// count is how many messages are in hand (one received twice counts
// twice until seal).
func (s *scanStore) count() int { return len(s.index) }

// reserve sizes the index for about n messages (the queue's count before
// the scan, and a twentieth more for arrivals), so that it does not grow
// by copying: each copy is garbage as large as the index, and growth
// leaves up to a quarter of it unused.
func (s *scanStore) reserve(n int64) {
	if n > 0 && n < 1<<31 {
		s.index = make([]scanEntry, 0, n+n/20+16)
		// A standard queue's key is its 36-byte MessageId.
		s.keys = make([]byte, 0, 40*(n+n/20+16))
	}
}

// id, group and seq are the strings of e's order key.
func (s *scanStore) id(e *scanEntry) []byte {
	return s.keys[e.key : e.key+int64(e.idLen)]
}

func (s *scanStore) group(e *scanEntry) []byte {
	i := e.key + int64(e.idLen)
	return s.keys[i : i+int64(e.groupLen)]
}

func (s *scanStore) seq(e *scanEntry) []byte {
	i := e.key + int64(e.idLen) + int64(e.groupLen)
	return s.keys[i : i+int64(e.seqLen)]
}

// less orders two entries: by SentTimestamp then MessageId; in a FIFO
// queue by group (groups by their oldest message), then SequenceNumber.
func (s *scanStore) less(a, b *scanEntry) bool {
	if a.groupFirst != b.groupFirst {
		return a.groupFirst < b.groupFirst
	}
	if c := bytes.Compare(s.group(a), s.group(b)); c != 0 {
		return c < 0
	}
	as, bs := s.seq(a), s.seq(b)
	if len(as) > 0 && len(bs) > 0 && !bytes.Equal(as, bs) {
		// Sequence numbers are decimal strings of up to 128 bits.
		if len(as) != len(bs) {
			return len(as) < len(bs)
		}
		return bytes.Compare(as, bs) < 0
	}
	if a.sent != b.sent {
		return a.sent < b.sent
	}
	return bytes.Compare(s.id(a), s.id(b)) < 0
}

// seal ends the receiving: the message file is flushed and the entries
// put in dead-letter order, a message received twice kept once (its
// copies have one sort key, so they end up side by side).
func (s *scanStore) seal(fifo bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := s.mw.Flush(); err != nil {
		return fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	if fifo {
		first := map[string]int64{}
		for i := range s.index {
			e := &s.index[i]
			if f, ok := first[string(s.group(e))]; !ok || e.sent < f {
				first[string(s.group(e))] = e.sent
			}
		}
		for i := range s.index {
			s.index[i].groupFirst = first[string(s.group(&s.index[i]))]
		}
	}
	sort.SliceStable(s.index, func(a, b int) bool { return s.less(&s.index[a], &s.index[b]) })
	out := s.index[:0]
	for i := range s.index {
		e := s.index[i]
		if i > 0 && bytes.Equal(s.id(&e), s.id(&out[len(out)-1])) {
			continue
		}
		out = append(out, e)
	}
	s.index = out
	return nil
}

// message reads entry i back from the message file.
func (s *scanStore) message(i int) (types.Message, error) {
	e := s.index[i]
	b := make([]byte, e.n)
	if _, err := s.msgs.ReadAt(b, e.off); err != nil {
		return types.Message{}, fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	var sp spilled
	if err := json.Unmarshal(b, &sp); err != nil {
		return types.Message{}, fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	m := types.Message{MessageId: aws.String(sp.ID), Body: aws.String(sp.Body), Attributes: sp.Attrs}
	if len(sp.Msg) > 0 {
		m.MessageAttributes = make(map[string]types.MessageAttributeValue, len(sp.Msg))
		for k, v := range sp.Msg {
			m.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String(v.Type), StringValue: v.Str, BinaryValue: v.Bin}
		}
	}
	return m, nil
}

func (s *scanStore) close() {
	s.msgs.Close()
	s.handles.close()
}

// handleStore keeps receipt handles: the first bound in memory, the rest
// in a temporary file (each with its offset in memory, 8 bytes).
type handleStore struct {
	bound int
	mem   []string
	f     *os.File
	w     *bufio.Writer
	offs  []int64
	end   int64
}

func (h *handleStore) len() int { return len(h.mem) + len(h.offs) }

// inMemory is how many handles are held in memory (tests of the bound).
func (h *handleStore) inMemory() int { return len(h.mem) }

func (h *handleStore) add(handle string) error {
	if len(h.mem) < h.bound {
		h.mem = append(h.mem, handle)
		return nil
	}
	if h.f == nil {
		f, err := tempFile("dlqctl-sqs-handles-")
		if err != nil {
			return err
		}
		h.f, h.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	if _, err := h.w.WriteString(handle); err != nil {
		return fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	h.offs = append(h.offs, h.end)
	h.end += int64(len(handle))
	return nil
}

// get returns handles [i, j).
func (h *handleStore) get(i, j int) ([]string, error) {
	out := make([]string, 0, j-i)
	for ; i < j && i < len(h.mem); i++ {
		out = append(out, h.mem[i])
	}
	if i >= j {
		return out, nil
	}
	if err := h.w.Flush(); err != nil {
		return nil, fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	k, l := i-len(h.mem), j-len(h.mem)
	end := h.end
	if l < len(h.offs) {
		end = h.offs[l]
	}
	buf := make([]byte, end-h.offs[k])
	if _, err := h.f.ReadAt(buf, h.offs[k]); err != nil && err != io.EOF {
		return nil, fmt.Errorf("sqs scan: temporary file: %w", err)
	}
	for x := k; x < l; x++ {
		e := end
		if x+1 < len(h.offs) {
			e = h.offs[x+1]
		}
		out = append(out, string(buf[h.offs[x]-h.offs[k]:e-h.offs[k]]))
	}
	return out, nil
}

func (h *handleStore) close() {
	if h.f != nil {
		h.f.Close()
	}
}

// scanHandles is the handle range [i, j) of the store, read under its
// lock (the extender reads while receivers add).
func (s *scanStore) scanHandles(i, j int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handles.get(i, j)
}

// releaseStore makes every message of the scan visible again, reading
// the handles 1,000 at a time, even when ctx has ended.
func (q *Queue) releaseStore(s *scanStore) error {
	n := s.handles.len()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(n/50)*time.Second)
	defer cancel()
	for i := 0; i < n; i += 1000 {
		hs, err := s.scanHandles(i, min(i+1000, n))
		if err != nil {
			return err
		}
		if err := q.releaseHandles(ctx, hs); err != nil {
			return err
		}
	}
	return nil
}
