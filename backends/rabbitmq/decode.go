package rabbitmq

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/envelope"
)

// Headers RabbitMQ writes on a dead letter, and the one a quorum queue
// writes on every redelivery.
const (
	hXDeath             = "x-death"
	hFirstDeathQueue    = "x-first-death-queue"
	hFirstDeathReason   = "x-first-death-reason"
	hFirstDeathExchange = "x-first-death-exchange"
	hDeliveryCount      = "x-delivery-count"
	// hDeathHistory keeps a redriven message's x-death under a name the
	// broker does not interpret (see stripDeath).
	hDeathHistory = "dlqctl-x-death"
)

// Property names under which an entry keeps its AMQP message properties.
const (
	pMessageID       = "amqp.message_id"
	pCorrelationID   = "amqp.correlation_id"
	pContentEncoding = "amqp.content_encoding"
	pDeliveryMode    = "amqp.delivery_mode"
	pPriority        = "amqp.priority"
	pReplyTo         = "amqp.reply_to"
	pExpiration      = "amqp.expiration"
	pTimestamp       = "amqp.timestamp"
	pType            = "amqp.type"
	pUserID          = "amqp.user_id"
	pAppID           = "amqp.app_id"
	// pXDeath holds every x-death entry as a JSON array.
	pXDeath = "x-death"
)

// eventIDSource is where the event ID is read: the message_id property
// (then the event_id header), a header, or a path into a JSON payload.
type eventIDSource struct {
	kind string // "" (default), "property", "header", "json"
	name string
}

// parseEventIDSource parses --event-id-from for RabbitMQ.
func parseEventIDSource(s string) (eventIDSource, error) {
	if s == "" {
		return eventIDSource{}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == "property" && name == "message_id":
		return eventIDSource{kind: kind, name: name}, nil
	case ok && name != "" && (kind == "header" || kind == "json"):
		return eventIDSource{kind: kind, name: name}, nil
	}
	return eventIDSource{}, fmt.Errorf("--event-id-from %q: want property:message_id, header:NAME or json:PATH for RabbitMQ", s)
}

// parseKeySource parses --key-from for RabbitMQ: header:NAME, the header
// that holds the order key ("" for none given: the key header).
func parseKeySource(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if kind, name, ok := strings.Cut(s, ":"); ok && kind == "header" && name != "" {
		return name, nil
	}
	return "", fmt.Errorf("--key-from %q: want header:NAME for RabbitMQ", s)
}

// death is one x-death entry.
type death struct {
	Queue       string    `json:"queue"`
	Reason      string    `json:"reason"`
	Count       int64     `json:"count"`
	Exchange    string    `json:"exchange"`
	RoutingKeys []string  `json:"routing_keys"`
	Time        time.Time `json:"time"`
}

// message is what the decoder reads off one delivery: properties, headers
// and body. It is amqp.Delivery without the channel bits, so that tests
// and the fuzzer can build one.
type message struct {
	props   amqp.Publishing // Body and the properties
	headers amqp.Table
}

func fromDelivery(d *amqp.Delivery) message {
	return message{headers: d.Headers, props: amqp.Publishing{
		ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, DeliveryMode: d.DeliveryMode,
		Priority: d.Priority, CorrelationId: d.CorrelationId, ReplyTo: d.ReplyTo, Expiration: d.Expiration,
		MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, UserId: d.UserId, AppId: d.AppId,
		Body: d.Body,
	}}
}

// decoder maps messages to envelopes.
type decoder struct {
	names envelope.FieldNames
	from  eventIDSource
	// keyHeader, when set (--key-from header:NAME), is the header that
	// holds the order key; the key header is then a property like any
	// other.
	keyHeader string
	// quorumDeliveries gives, for an origin queue that is a quorum queue
	// with a delivery limit, how many deliveries it makes of a message
	// before it dead-letters it: the limit + 1 (0: not known, or none).
	quorumDeliveries func(queue string) int
}

// fieldOf maps a header name to the envelope field it is a name of.
func (d *decoder) fieldOf(name string) (string, bool) {
	f, _, ok := d.names.NameOf(name)
	return f, ok
}

// decode maps one message to an envelope; lean leaves Properties and Raw
// empty (stats). The envelope's ID is the message's identity hash; the
// scanner adds an ordinal among identical ones. It never fails: what
// cannot be read makes the entry malformed, with the reason.
func (d *decoder) decode(m message, lean bool) envelope.Envelope {
	e := envelope.Envelope{Origin: envelope.Origin{Backend: "rabbitmq"}}
	var errs []error
	fail := func(err error) { errs = append(errs, err) }
	fields, deaths, firstQueue, firstReason, props := d.readHeaders(m, fail)
	d.setFields(&e, m, fields, fail)
	last := d.setFromDeaths(&e, fields, deaths, firstQueue, firstReason)
	body := m.props.Body
	setPayload(&e, body, fields[envelope.FieldPayloadEncoding], fail)
	d.setEventID(&e, m, body, fail)
	if v, ok := m.headers[envelope.MalformedMarker]; ok {
		// Imported from an entry that was malformed where it came from:
		// it stays malformed, with that reason.
		reason, _ := v.(string)
		if reason == "" {
			reason = "malformed where it was imported from"
		}
		errs = append([]error{errors.New(reason)}, errs...)
	}
	if e.EventID == "" && len(errs) == 0 {
		fail(errors.New("no event ID: no message_id property and no event_id header"))
	}
	if !lean {
		addProps(&e, props, m.props, deaths)
	}
	e.ID = identity(m, fields[envelope.FieldFingerprint], last)
	if len(errs) > 0 {
		e.Malformed = errs[0].Error()
		e.Raw = rawMessage(m)
		return e
	}
	e.FillFingerprint()
	return e
}

// readHeaders sorts m's headers: envelope fields by field, the deaths
// (x-death), the first death's queue and reason, and the rest as
// properties. A header that cannot be read is reported to fail.
func (d *decoder) readHeaders(m message, fail func(error)) (fields map[string]string, deaths []death, firstQueue, firstReason string, props map[string]string) {
	fields = map[string]string{}
	props = map[string]string{}
	for k, v := range m.headers {
		switch k {
		case hXDeath:
			ds, err := parseDeaths(v)
			if err != nil {
				fail(err)
			}
			deaths = ds
			continue
		case hFirstDeathQueue, hFirstDeathReason, hFirstDeathExchange:
			s, ok := v.(string)
			if !ok || !utf8.ValidString(s) {
				fail(fmt.Errorf("header %s: want a UTF-8 string, got %T", k, v))
				continue
			}
			switch k {
			case hFirstDeathQueue:
				firstQueue = s
			case hFirstDeathReason:
				firstReason = s
			}
			props[k] = s
			continue
		case hDeliveryCount:
			// Counts this DLQ's own redeliveries (dlqctl's scans among
			// them), never the consumer's tries: not part of the entry.
			continue
		}
		s, err := headerString(v)
		if err != nil {
			fail(fmt.Errorf("header %q: %v", truncate(k), err))
			continue
		}
		if !utf8.ValidString(k) || !utf8.ValidString(s) {
			fail(fmt.Errorf("header %q: invalid UTF-8", truncate(strings.ToValidUTF8(k, "?"))))
			continue
		}
		if f, ok := d.fieldOf(k); ok && (f != envelope.FieldKey || d.keyHeader == "") {
			if _, dup := fields[f]; !dup || d.names[f][0] == k {
				fields[f] = s
			}
			continue
		}
		props[k] = s
	}
	return fields, deaths, firstQueue, firstReason, props
}

// setFields sets e's fields from the headers that name them (and the key
// from --key-from's header); a value that does not parse is reported to
// fail.
func (d *decoder) setFields(e *envelope.Envelope, m message, fields map[string]string, fail func(error)) {
	e.EventID = fields[envelope.FieldEventID]
	e.Fingerprint = fields[envelope.FieldFingerprint]
	e.PayloadVersion = fields[envelope.FieldPayloadVersion]
	e.ContentType = fields[envelope.FieldContentType]
	if e.ContentType == "" {
		e.ContentType = m.props.ContentType
	}
	e.Key = fields[envelope.FieldKey]
	if d.keyHeader != "" {
		// Absent: no key, so the entry is in the DLQ's one FIFO domain.
		e.Key = ""
		if v, ok := m.headers[d.keyHeader]; ok {
			s, err := headerString(v)
			switch {
			case err != nil:
				fail(fmt.Errorf("key header %q: %v", truncate(d.keyHeader), err))
			case !utf8.ValidString(s):
				fail(fmt.Errorf("key header %q: invalid UTF-8", truncate(d.keyHeader)))
			default:
				e.Key = s
			}
		}
	}
	e.Origin.Topic = fields[envelope.FieldOriginStream]
	e.Origin.Subscription = fields[envelope.FieldOriginGroup]
	e.Origin.Consumer = fields[envelope.FieldOriginConsumer]
	e.LastError = fields[envelope.FieldLastError]
	e.ErrorClass = fields[envelope.FieldErrorClass]
	e.Owner = fields[envelope.FieldOwner]
	e.SchemaInfo = fields[envelope.FieldSchemaInfo]
	for _, t := range []struct {
		f  string
		to *time.Time
	}{{envelope.FieldFirstReceivedAt, &e.FirstReceivedAt}, {envelope.FieldDeadLetteredAt, &e.DeadLetteredAt}, {envelope.FieldRecoverBy, &e.RecoverBy}} {
		if v := fields[t.f]; v != "" {
			tm, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				fail(fmt.Errorf("%s: want an RFC 3339 time, got %q", t.f, truncate(v)))
			}
			*t.to = tm.UTC()
		}
	}
	for _, n := range []struct {
		f  string
		to *int
	}{{envelope.FieldAttempts, &e.Attempts}, {envelope.FieldRedriveCount, &e.RedriveCount}} {
		if v := fields[n.f]; v != "" {
			i, err := strconv.Atoi(v)
			if err != nil {
				fail(fmt.Errorf("%s: want a whole number, got %q", n.f, truncate(v)))
			}
			*n.to = i
		}
	}
}

// setFromDeaths fills what the headers left unset from what the broker
// recorded: the origin queue, the reason, the time and the attempts. It
// returns the latest death (zero when none).
func (d *decoder) setFromDeaths(e *envelope.Envelope, fields map[string]string, deaths []death, firstQueue, firstReason string) death {
	var last death
	if len(deaths) > 0 {
		last = deaths[0]
	}
	if e.Origin.Topic == "" {
		e.Origin.Topic = firstQueue
		if e.Origin.Topic == "" {
			e.Origin.Topic = last.Queue
		}
	}
	if e.LastError == "" {
		e.LastError = last.Reason
		if e.LastError == "" {
			e.LastError = firstReason
		}
	}
	if e.DeadLetteredAt.IsZero() && !last.Time.IsZero() {
		e.DeadLetteredAt = last.Time
	}
	if fields[envelope.FieldAttempts] == "" {
		deliveries := 0
		if d.quorumDeliveries != nil && e.Origin.Topic != "" {
			deliveries = d.quorumDeliveries(e.Origin.Topic)
		}
		switch {
		case deliveries > 0:
			e.Attempts = deliveries
		case last.Count > 0:
			e.Attempts = int(min(last.Count, 1<<31-1))
		}
	}
	return last
}

// setPayload sets e's payload and its encoding from body and the
// payload_encoding header enc.
func setPayload(e *envelope.Envelope, body []byte, enc string, fail func(error)) {
	switch enc {
	case "", envelope.EncodingUTF8, envelope.EncodingJSON:
		e.PayloadEncoding = envelope.ClassifyPayload(body)
		if enc == envelope.EncodingUTF8 && !utf8.Valid(body) {
			fail(errors.New("payload: payload_encoding utf8 but not valid UTF-8"))
		}
		if enc == envelope.EncodingJSON && !json.Valid(body) {
			fail(errors.New("payload: payload_encoding json but not valid JSON"))
		}
	case envelope.EncodingBase64:
		e.PayloadEncoding = envelope.EncodingBase64
	default:
		fail(fmt.Errorf("payload_encoding: unknown %q (want json, utf8 or base64)", truncate(enc)))
		e.PayloadEncoding = envelope.ClassifyPayload(body)
	}
	e.Payload = body
}

// setEventID sets e's event ID from where --event-id-from says it is.
func (d *decoder) setEventID(e *envelope.Envelope, m message, body []byte, fail func(error)) {
	switch d.from.kind {
	case "", "property":
		if m.props.MessageId != "" {
			if !utf8.ValidString(m.props.MessageId) {
				fail(errors.New("message_id: invalid UTF-8"))
			}
			e.EventID = m.props.MessageId
		} else if d.from.kind == "property" {
			e.EventID = ""
		}
	case "header":
		e.EventID = ""
		if v, ok := m.headers[d.from.name]; ok {
			s, err := headerString(v)
			switch {
			case err != nil:
				fail(fmt.Errorf("event ID header %q: %v", d.from.name, err))
			case !utf8.ValidString(s):
				fail(fmt.Errorf("event ID header %q: invalid UTF-8", d.from.name))
			default:
				e.EventID = s
			}
		}
	case "json":
		id, err := envelope.EventIDAtJSONPath(body, d.from.name)
		if err != nil {
			fail(err)
		}
		e.EventID = id
	}
}

func addProps(e *envelope.Envelope, props map[string]string, p amqp.Publishing, deaths []death) {
	set := func(k, v string) {
		if v != "" {
			props[k] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	set(pMessageID, p.MessageId)
	set(pCorrelationID, p.CorrelationId)
	set(pContentEncoding, p.ContentEncoding)
	if p.DeliveryMode != 0 {
		set(pDeliveryMode, strconv.Itoa(int(p.DeliveryMode)))
	}
	if p.Priority != 0 {
		set(pPriority, strconv.Itoa(int(p.Priority)))
	}
	set(pReplyTo, p.ReplyTo)
	set(pExpiration, p.Expiration)
	if !p.Timestamp.IsZero() {
		set(pTimestamp, p.Timestamp.UTC().Format(time.RFC3339))
	}
	set(pType, p.Type)
	set(pUserID, p.UserId)
	set(pAppID, p.AppId)
	if len(deaths) > 0 {
		b, _ := json.Marshal(deaths) // strings, numbers and times always marshal
		props[pXDeath] = string(b)
	}
	if len(props) > 0 {
		e.Properties = props
	}
}

// identity is an entry's locator: stable across scans, whatever was
// removed ahead of it, because it is made only of what the message
// carries — its message_id, the time, queue, reason and count of its
// latest death, its timestamp and its fingerprint. Two messages alike in
// all of these are told apart by the scanner's ordinal (see ids).
func identity(m message, carriedFingerprint string, last death) string {
	h := sha256.New()
	put := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	put(m.props.MessageId)
	put(last.Queue)
	put(last.Reason)
	put(strconv.FormatInt(last.Count, 10))
	put(strconv.FormatInt(last.Time.Unix(), 10))
	put(strconv.FormatInt(m.props.Timestamp.Unix(), 10))
	if carriedFingerprint != "" {
		put(carriedFingerprint)
	} else {
		sum := sha256.Sum256(m.props.Body)
		put(string(sum[:]))
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// ids numbers identical messages in queue order: the first keeps the
// identity hash, the nth gets "-n".
type ids map[string]int

func (s ids) next(base string) string {
	s[base]++
	if n := s[base]; n > 1 {
		return base + "-" + strconv.Itoa(n)
	}
	return base
}

// parseDeaths reads an x-death header: an array of tables with queue,
// reason, count, exchange, routing-keys and time.
func parseDeaths(v any) ([]death, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("header x-death: want an array of tables, got %T", v)
	}
	out := make([]death, 0, len(arr))
	for i, x := range arr {
		t, ok := x.(amqp.Table)
		if !ok {
			return out, fmt.Errorf("header x-death[%d]: want a table, got %T", i, x)
		}
		var d death
		var err error
		str := func(k string) string {
			s, ok := t[k].(string)
			if !ok && t[k] != nil && err == nil {
				err = fmt.Errorf("header x-death[%d].%s: want a string, got %T", i, k, t[k])
			}
			if !utf8.ValidString(s) && err == nil {
				err = fmt.Errorf("header x-death[%d].%s: invalid UTF-8", i, k)
			}
			return s
		}
		d.Queue, d.Reason, d.Exchange = str("queue"), str("reason"), str("exchange")
		if c, ok := t["count"]; ok {
			n, ok := toInt(c)
			if !ok && err == nil {
				err = fmt.Errorf("header x-death[%d].count: want a number, got %T", i, c)
			}
			d.Count = n
		}
		switch ts := t["time"].(type) {
		case time.Time:
			d.Time = ts.UTC()
		case nil:
		default:
			if err == nil {
				err = fmt.Errorf("header x-death[%d].time: want a timestamp, got %T", i, ts)
			}
		}
		if rk, ok := t["routing-keys"]; ok {
			keys, ok := rk.([]any)
			if !ok && err == nil {
				err = fmt.Errorf("header x-death[%d].routing-keys: want an array, got %T", i, rk)
			}
			for _, k := range keys {
				if s, ok := k.(string); ok && utf8.ValidString(s) {
					d.RoutingKeys = append(d.RoutingKeys, s)
				} else if err == nil {
					err = fmt.Errorf("header x-death[%d].routing-keys: want UTF-8 strings", i)
				}
			}
		}
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n > 1<<63-1 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// headerString is a header value as property text: strings as they are;
// bytes as text when they are UTF-8, else "base64:" and their base64;
// numbers, booleans and times as text; tables and arrays as JSON.
func headerString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		if utf8.Valid(x) {
			return string(x), nil
		}
		return "base64:" + base64.StdEncoding.EncodeToString(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case time.Time:
		return x.UTC().Format(time.RFC3339), nil
	case amqp.Decimal:
		return fmt.Sprintf("%de-%d", x.Value, x.Scale), nil
	case nil:
		return "", nil
	case amqp.Table, []any:
		j, err := jsonValue(x)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(j)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	if n, ok := toInt(v); ok {
		return strconv.FormatInt(n, 10), nil
	}
	return "", fmt.Errorf("unsupported value type %T", v)
}

// jsonValue turns a table or array into values encoding/json writes,
// with the same conventions as headerString for the leaves.
func jsonValue(v any) (any, error) {
	switch x := v.(type) {
	case amqp.Table:
		out := make(map[string]any, len(x))
		for k, v := range x {
			j, err := jsonValue(v)
			if err != nil {
				return nil, err
			}
			out[strings.ToValidUTF8(k, "\uFFFD")] = j
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			j, err := jsonValue(v)
			if err != nil {
				return nil, err
			}
			out[i] = j
		}
		return out, nil
	case string:
		return strings.ToValidUTF8(x, "\uFFFD"), nil
	}
	s, err := headerString(v)
	if err != nil {
		return nil, err
	}
	if n, ok := toInt(v); ok {
		return n, nil
	}
	return s, nil
}

// rawMessage is a malformed message as it was read, so that export loses
// nothing: body (base64), properties and headers (as JSON, binary values
// as base64).
func rawMessage(m message) []byte {
	hdr, _ := jsonValue(m.headers)
	b, err := json.Marshal(struct {
		Body      []byte `json:"body"`
		MessageID string `json:"message_id,omitempty"`
		Type      string `json:"type,omitempty"`
		Content   string `json:"content_type,omitempty"`
		Headers   any    `json:"headers,omitempty"`
	}{m.props.Body, strings.ToValidUTF8(m.props.MessageId, "\uFFFD"), strings.ToValidUTF8(m.props.Type, "\uFFFD"),
		strings.ToValidUTF8(m.props.ContentType, "\uFFFD"), hdr})
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// DecodeDelivery maps a delivery to an envelope with the default field
// names, as a scan of the DLQ would (event ID from message_id, then the
// event_id header): the reference worker reads its origin queue with it.
func DecodeDelivery(d *amqp.Delivery) envelope.Envelope {
	names, _ := envelope.FieldNames(nil).Complete() // the defaults always complete
	dec := decoder{names: names}
	return dec.decode(fromDelivery(d), true)
}
