package kafkadlq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/envelope"
)

// The dead-lettering headers, family by family: where each family says the
// record came from (Spring, Kafka Connect, Karafka; a share group's broker
// in share.go), what error it names, and which of its headers are binary
// numbers shown as text.

// KafkaOrigin is where a dead letter was consumed from, as its
// dead-lettering headers say. Partition and Offset are -1 when unknown.
type KafkaOrigin struct {
	Topic     string
	Partition int32
	Offset    int64
	Group     string
}

// OriginOf reads the original topic, partition, offset and group from a
// record's dead-lettering headers (Spring, then Kafka Connect, then
// Karafka); a header that does not decode is an error.
func OriginOf(headers []KafkaHeader) (KafkaOrigin, error) {
	if s, ok, err := shareDeadLetterOf(headers); ok {
		return s.origin(), err
	}
	h := headerList(headers)
	return originFrom(h, h.index(), nil, nil)
}

// headerList is a record's headers, the last of a name winning.
type headerList []KafkaHeader

// dlRole numbers the dead-lettering headers dlqctl reads.
type dlRole uint8

const (
	roleSpringTopic dlRole = iota
	roleSpringPartition
	roleSpringOffset
	roleSpringTimestamp
	roleSpringGroup
	roleSpringFQCN
	roleSpringMessage
	roleConnectTopic
	roleConnectPartition
	roleConnectOffset
	roleConnectConnector
	roleConnectClass
	roleConnectMessage
	roleKarafkaTopic
	roleKarafkaPartition
	roleKarafkaOffset
	roleKarafkaGroup
	numRoles
	noRole = numRoles
)

// roleNames are the header names of the roles, by number.
var roleNames = [numRoles]string{
	SpringOriginalTopic, SpringOriginalPartition, SpringOriginalOffset, SpringOriginalTimestamp,
	SpringOriginalGroup, SpringExceptionFQCN, SpringExceptionMessage, ConnectTopic, ConnectPartition,
	ConnectOffset, ConnectConnectorName, ConnectExceptionClass, ConnectExceptionMessage, KarafkaTopic,
	KarafkaPartition, KarafkaOffset, KarafkaConsumerGroup,
}

// roleOf is the role of a header name, noRole for any other.
func roleOf(name string) dlRole {
	switch name {
	case SpringOriginalTopic:
		return roleSpringTopic
	case SpringOriginalPartition:
		return roleSpringPartition
	case SpringOriginalOffset:
		return roleSpringOffset
	case SpringOriginalTimestamp:
		return roleSpringTimestamp
	case SpringOriginalGroup:
		return roleSpringGroup
	case SpringExceptionFQCN:
		return roleSpringFQCN
	case SpringExceptionMessage:
		return roleSpringMessage
	case ConnectTopic:
		return roleConnectTopic
	case ConnectPartition:
		return roleConnectPartition
	case ConnectOffset:
		return roleConnectOffset
	case ConnectConnectorName:
		return roleConnectConnector
	case ConnectExceptionClass:
		return roleConnectClass
	case ConnectExceptionMessage:
		return roleConnectMessage
	case KarafkaTopic:
		return roleKarafkaTopic
	case KarafkaPartition:
		return roleKarafkaPartition
	case KarafkaOffset:
		return roleKarafkaOffset
	case KarafkaConsumerGroup:
		return roleKarafkaGroup
	}
	return noRole
}

// roleIndex gives, for each role, the index of the last header of its
// name (-1: none): each header's name is compared once, not once per
// lookup.
type roleIndex [numRoles]int

func (hs headerList) index() roleIndex {
	var ix roleIndex
	for r := range ix {
		ix[r] = -1
	}
	for i, h := range hs {
		if r := roleOf(h.Key); r != noRole {
			ix[r] = i
		}
	}
	return ix
}

// originReader reads the origin out of dead-lettering headers located by
// ix, collecting what does not decode. text and valid, when given, hold
// each header's value as a string already and whether it is UTF-8, so
// that neither is worked out again.
type originReader struct {
	h     headerList
	ix    *roleIndex
	text  []string
	valid []bool
	// errs is the caller's: appending to a field of the reader would
	// move the headers it reads, on the caller's stack, to the heap.
	errs *[]error
}

func (or *originReader) fail(err error) { *or.errs = append(*or.errs, err) }

// str is the value of role r's header as text ("" when absent or not
// UTF-8, which is an error).
func (or *originReader) str(r dlRole) string {
	i := or.ix[r]
	if i < 0 {
		return ""
	}
	ok := false
	if or.valid != nil {
		ok = or.valid[i]
	} else {
		ok = utf8.Valid(or.h[i].Value)
	}
	if !ok {
		or.fail(fmt.Errorf("header %s: invalid UTF-8", roleNames[r]))
		return ""
	}
	if or.text != nil {
		return or.text[i]
	}
	return string(or.h[i].Value)
}

// num is role r's header as a decimal number of bits bits (-1: absent or
// not a whole number, which is an error).
func (or *originReader) num(r dlRole, bits int) int64 {
	s := or.str(r)
	if s == "" {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil || n < 0 {
		or.fail(fmt.Errorf("header %s: want a whole number, got %q", roleNames[r], envelope.TruncateForError(s)))
		return -1
	}
	return n
}

// spring reads Spring Kafka's origin: text topic and group, a 4-byte
// partition and an 8-byte offset, big-endian.
func (or *originReader) spring(o *KafkaOrigin) {
	o.Topic = or.str(roleSpringTopic)
	o.Group = or.str(roleSpringGroup)
	if i := or.ix[roleSpringPartition]; i >= 0 {
		if v := or.h[i].Value; len(v) != 4 {
			or.fail(fmt.Errorf("header %s: want a 4-byte big-endian integer, got %d bytes", SpringOriginalPartition, len(v)))
		} else {
			o.Partition = int32(binary.BigEndian.Uint32(v))
		}
	}
	if i := or.ix[roleSpringOffset]; i >= 0 {
		if v := or.h[i].Value; len(v) != 8 {
			or.fail(fmt.Errorf("header %s: want an 8-byte big-endian integer, got %d bytes", SpringOriginalOffset, len(v)))
		} else {
			o.Offset = int64(binary.BigEndian.Uint64(v))
		}
	}
}

// connect reads Kafka Connect's origin: all text, numbers in decimal; it
// names no group.
func (or *originReader) connect(o *KafkaOrigin) {
	o.Topic = or.str(roleConnectTopic)
	o.Partition = int32(or.num(roleConnectPartition, 32))
	o.Offset = or.num(roleConnectOffset, 64)
}

// karafka reads Karafka's origin: all text, numbers in decimal.
func (or *originReader) karafka(o *KafkaOrigin) {
	o.Topic = or.str(roleKarafkaTopic)
	o.Partition = int32(or.num(roleKarafkaPartition, 32))
	o.Offset = or.num(roleKarafkaOffset, 64)
	o.Group = or.str(roleKarafkaGroup)
}

// originFrom is OriginOf on headers located by ix (see originReader for
// text and valid): the first family whose topic header is there says.
func originFrom(h headerList, ix roleIndex, text []string, valid []bool) (KafkaOrigin, error) {
	o := KafkaOrigin{Partition: -1, Offset: -1}
	var errs []error
	or := originReader{h: h, ix: &ix, text: text, valid: valid, errs: &errs}
	switch {
	case ix[roleSpringTopic] >= 0:
		or.spring(&o)
	case ix[roleConnectTopic] >= 0:
		or.connect(&o)
	case ix[roleKarafkaTopic] >= 0:
		or.karafka(&o)
	}
	if o.Partition < -1 {
		or.fail(fmt.Errorf("original partition %d is negative", o.Partition))
		o.Partition = -1
	}
	if o.Offset < -1 {
		or.fail(fmt.Errorf("original offset %d is negative", o.Offset))
		o.Offset = -1
	}
	return o, errors.Join(errs...)
}

// deadLettering is a record's dead-lettering headers (DeadLetterHeader)
// in record order, each value also as text and whether that is UTF-8,
// and (once indexed) where the last header of each role is.
type deadLettering struct {
	h     headerList
	roles []dlRole // of each header, noRole for one dlqctl does not read
	text  []string
	valid []bool
	ix    roleIndex
}

// index is headerList.index from the roles known already.
func (dl *deadLettering) index() roleIndex {
	var ix roleIndex
	for r := range ix {
		ix[r] = -1
	}
	for i, r := range dl.roles {
		if r != noRole {
			ix[r] = i
		}
	}
	return ix
}

// shadowed says whether a later header has the same name as dl.h[i].
func (dl *deadLettering) shadowed(i int) bool {
	if r := dl.roles[i]; r != noRole {
		return dl.ix[r] != i
	}
	for j := i + 1; j < len(dl.h); j++ {
		if dl.h[j].Key == dl.h[i].Key {
			return true
		}
	}
	return false
}

// textOf is role r's header as text, "" when absent or not UTF-8.
func (dl *deadLettering) textOf(r dlRole) string {
	if i := dl.ix[r]; i >= 0 && dl.valid[i] {
		return dl.text[i]
	}
	return ""
}

// errorOf is the error message and class the dead-lettering names:
// Spring's, else Kafka Connect's.
func (dl *deadLettering) errorOf() (msg, class string) {
	msg, class = dl.textOf(roleSpringMessage), dl.textOf(roleSpringFQCN)
	if msg == "" && class == "" {
		msg, class = dl.textOf(roleConnectMessage), dl.textOf(roleConnectClass)
	}
	return msg, class
}

// springTimestamp is kafka_dlt-original-timestamp as a time, zero when
// absent or not 8 bytes.
func (dl *deadLettering) springTimestamp() time.Time {
	if i := dl.ix[roleSpringTimestamp]; i >= 0 && len(dl.h[i].Value) == 8 {
		return time.UnixMilli(int64(binary.BigEndian.Uint64(dl.h[i].Value))).UTC()
	}
	return time.Time{}
}

// apply fills e's origin and error from the dead-lettering headers of
// every family, and returns the origin they name. Fields the envelope
// headers set win, unless they describe an earlier dead-lettering than
// these headers do (staleDeadLettering).
func (dl *deadLettering) apply(e *envelope.Envelope, kv *envelope.KVReader, recordTime time.Time) KafkaOrigin {
	dl.ix = dl.index()
	orig, err := originFrom(dl.h, dl.ix, dl.text, dl.valid)
	if err != nil {
		kv.Fail(err)
	}
	if orig.Topic != "" {
		e.Origin.Topic = orig.Topic
	}
	if orig.Group != "" {
		e.Origin.Subscription = orig.Group
	}
	if c := dl.textOf(roleConnectConnector); c != "" && e.Origin.Consumer == "" {
		e.Origin.Consumer = c
	}
	msg, class := dl.errorOf()
	if share, ok, err := shareDeadLetterOf(dl.h); ok {
		if err != nil {
			kv.Fail(err)
		}
		applyShare(e, share, kv.Fail)
		if msg == "" && class == "" {
			msg, class = share.Message, share.Disposition
		}
	}
	if msg != "" || class != "" {
		forgetEarlierDeadLettering(e, kv, dl.springTimestamp(), recordTime)
	}
	if e.LastError == "" {
		e.LastError = msg
		if e.LastError == "" {
			e.LastError = class
		}
	}
	if e.ErrorClass == "" {
		e.ErrorClass = class
	}
	return orig
}

// forgetEarlierDeadLettering clears e's error and sets its time when its
// dlqctl fields describe an earlier dead-lettering than the record's own
// headers (an imported entry redriven and failed again, by a consumer
// that copies headers): the newer one's error and time win. Only a record
// that passed through dlqctl (imported, or put back by a redrive) can
// carry such fields: a producer that writes the envelope fields and
// Spring's headers, its record relayed, copied between clusters or
// restored later, keeps its own.
func forgetEarlierDeadLettering(e *envelope.Envelope, kv *envelope.KVReader, origTS, recordTime time.Time) {
	_, imported := kv.Fields.Lookup(envelope.ImportedFromProperty)
	_, redriven := kv.Fields.Lookup(redrivenFromHeader)
	if !redriven {
		_, redriven = kv.Fields.Lookup(runIDHeader)
	}
	if !imported && !redriven {
		return
	}
	if at, stale := staleDeadLettering(e.DeadLetteredAt, origTS, recordTime, imported && !redriven); stale {
		e.LastError, e.ErrorClass, e.DeadLetteredAt = "", "", at
	}
}

// setProperties keeps the dead-lettering headers visible as properties
// (none when lean, though every check still runs): the text ones as they
// are, Spring's binary ones as decimal numbers and a time, written into
// one more string.
func (dl *deadLettering) setProperties(e *envelope.Envelope, kv *envelope.KVReader, orig KafkaOrigin, lean bool) {
	var numBuf [80]byte
	nums := numBuf[:0]
	type span struct {
		key      string
		from, to int
	}
	var spans [3]span
	nspans := 0
	for i, h := range dl.h {
		if dl.shadowed(i) {
			continue // a later header of the name is the one that counts
		}
		switch h.Key {
		case SpringOriginalPartition, SpringOriginalOffset, SpringOriginalTimestamp:
			from := len(nums)
			var err error
			if nums, err = springNumber(nums, h, orig, lean); err != nil {
				kv.Fail(err)
			} else if len(nums) > from {
				spans[nspans] = span{h.Key, from, len(nums)}
				nspans++
			}
			continue
		}
		if !dl.valid[i] {
			kv.Fail(fmt.Errorf("header %s: invalid UTF-8", envelope.TruncateForError(h.Key)))
			continue
		}
		if !lean {
			envelope.SetProperty(e, h.Key, dl.text[i])
		}
	}
	if nspans > 0 {
		s := string(nums)
		for _, sp := range spans[:nspans] {
			envelope.SetProperty(e, sp.key, s[sp.from:sp.to])
		}
	}
}

// springNumber appends to nums the property text of one of Spring's
// binary headers (partition, offset, timestamp): nothing when lean, or
// when the origin left the number unknown; a timestamp not 8 bytes long
// is an error, lean or not (originFrom checked the other two).
func springNumber(nums []byte, h KafkaHeader, orig KafkaOrigin, lean bool) ([]byte, error) {
	switch h.Key {
	case SpringOriginalPartition:
		if !lean && orig.Partition >= 0 {
			nums = strconv.AppendInt(nums, int64(orig.Partition), 10)
		}
	case SpringOriginalOffset:
		if !lean && orig.Offset >= 0 {
			nums = strconv.AppendInt(nums, orig.Offset, 10)
		}
	case SpringOriginalTimestamp:
		if len(h.Value) != 8 {
			return nums, fmt.Errorf("header %s: want an 8-byte big-endian integer, got %d bytes", h.Key, len(h.Value))
		}
		if !lean {
			ms := int64(binary.BigEndian.Uint64(h.Value))
			nums = time.UnixMilli(ms).UTC().AppendFormat(nums, time.RFC3339Nano)
		}
	}
	return nums, nil
}
