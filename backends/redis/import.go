package redisstream

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Fields dlqctl adds to imported entries. Neither names an envelope field,
// so both read back as properties.
const (
	// SourceIDField keeps the original id of an imported envelope whose id
	// is not a stream entry id (a dir file name, a Pulsar message id).
	SourceIDField = "dlqctl_source_id"
	// MalformedField keeps why an envelope was malformed when it is
	// written as fields rather than as the raw fields it came from.
	MalformedField = envelope.MalformedMarker
)

// Import adds e to the stream and returns its entry id.
//
// An envelope whose id is a stream entry id keeps it (XADD with that id);
// Redis streams only append, so an id older than the stream's last one is
// refused with an error saying so. Any other id gets a new entry id and is
// kept in the field dlqctl_source_id. Either way an id already present is
// refused with backend.ErrExists. The set of dlqctl_source_id values is
// read by one scan on first need and kept for the life of the Stream.
func (s *Stream) Import(ctx context.Context, e envelope.Envelope) (string, error) {
	fields := s.entryFields(e)
	if IsStreamID(e.ID) {
		return s.addWithID(ctx, e.ID, fields)
	}
	return s.addNew(ctx, e.ID, fields)
}

// Has reports whether id is present: as the entry id when it is a stream
// id, else as the dlqctl_source_id of an imported entry.
func (s *Stream) Has(ctx context.Context, id string) (bool, error) {
	if IsStreamID(id) {
		return s.exists(ctx, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sourceIDs == nil {
		ids, err := s.loadSourceIDs(ctx)
		if err != nil {
			return false, err
		}
		s.sourceIDs = ids
	}
	return s.sourceIDs[id], nil
}

func (s *Stream) addWithID(ctx context.Context, id string, fields []string) (string, error) {
	exists, err := s.exists(ctx, id)
	if err != nil {
		return "", err
	}
	if exists {
		return "", fmt.Errorf("import %s: %w in %s", id, backend.ErrExists, s)
	}
	got, err := s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.key, ID: id, Values: fields}).Result()
	if err == nil {
		return got, nil
	}
	if !strings.Contains(err.Error(), "equal or smaller") {
		return "", s.cmdErr(ctx, "import "+id+": xadd", err)
	}
	// Another writer may have added this very id since the check.
	if exists, xerr := s.exists(ctx, id); xerr == nil && exists {
		return "", fmt.Errorf("import %s: %w in %s", id, backend.ErrExists, s)
	}
	last := "?"
	if info, ierr := s.rdb.XInfoStream(ctx, s.key).Result(); ierr == nil {
		last = info.LastGeneratedID
	}
	return "", fmt.Errorf("import %s into %s: Redis streams only append, and this id is older than the stream's last id %s: import into a new stream, or import in id order", id, s, last)
}

func (s *Stream) exists(ctx context.Context, id string) (bool, error) {
	msgs, err := s.rdb.XRange(ctx, s.key, id, id).Result()
	if err != nil {
		return false, s.cmdErr(ctx, "xrange", err)
	}
	return len(msgs) > 0, nil
}

// addNew adds an entry under a new id, recording sourceID. The lock makes
// the duplicate check and the add one step for this process.
func (s *Stream) addNew(ctx context.Context, sourceID string, fields []string) (string, error) {
	if sourceID == "" {
		got, err := s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.key, Values: fields}).Result()
		if err != nil {
			return "", s.cmdErr(ctx, "import: xadd", err)
		}
		return got, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sourceIDs == nil {
		ids, err := s.loadSourceIDs(ctx)
		if err != nil {
			return "", err
		}
		s.sourceIDs = ids
	}
	if s.sourceIDs[sourceID] {
		return "", fmt.Errorf("import %s: %w in %s (field %s)", sourceID, backend.ErrExists, s, SourceIDField)
	}
	fields = setField(fields, SourceIDField, sourceID)
	got, err := s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.key, Values: fields}).Result()
	if err != nil {
		return "", s.cmdErr(ctx, "import "+sourceID+": xadd", err)
	}
	s.sourceIDs[sourceID] = true
	return got, nil
}

// loadSourceIDs reads the dlqctl_source_id of every entry, a page at a time.
func (s *Stream) loadSourceIDs(ctx context.Context) (map[string]bool, error) {
	ids := map[string]bool{}
	start := "-"
	for {
		msgs, err := s.rdb.XRangeN(ctx, s.key, start, "+", int64(s.pageSize)).Result()
		if err != nil {
			return nil, s.cmdErr(ctx, "xrange", err)
		}
		for _, m := range msgs {
			if v, ok := m.Values[SourceIDField].(string); ok {
				ids[v] = true
			}
		}
		if len(msgs) < s.pageSize {
			return ids, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// entryFields lays e out as stream fields, name then value.
func (s *Stream) entryFields(e envelope.Envelope) []string {
	if e.Malformed != "" {
		if raw, ok := rawObject(e.Raw); ok {
			return raw // the fields it came from, as they were
		}
	}
	w := envelope.NewFieldWriter(s.names)
	payload, encoding := envelope.ImportPayload(e)
	w.Identity(e)
	// Always written, even empty: an entry without it reads as malformed.
	w.Put(envelope.FieldPayload, string(payload))
	w.Str(envelope.FieldPayloadEncoding, encoding)
	w.Str(envelope.FieldPayloadVersion, e.PayloadVersion)
	w.Str(envelope.FieldContentType, e.ContentType)
	w.Str(envelope.FieldKey, e.Key)
	w.Origin(e.Origin, "")
	w.Put(envelope.FieldAttempts, strconv.Itoa(e.Attempts))
	w.Str(envelope.FieldLastError, e.LastError)
	w.Str(envelope.FieldErrorClass, e.ErrorClass)
	w.Time(envelope.FieldFirstReceivedAt, e.FirstReceivedAt)
	w.Time(envelope.FieldDeadLetteredAt, e.DeadLetteredAt)
	w.Str(envelope.FieldOwner, e.Owner)
	w.Time(envelope.FieldRecoverBy, e.RecoverBy)
	w.Str(envelope.FieldSchemaInfo, e.SchemaInfo)
	w.Put(envelope.FieldRedriveCount, strconv.Itoa(e.RedriveCount))
	if e.Malformed != "" {
		w.Raw(MalformedField, e.Malformed)
	}
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		w.Property(k, e.Properties[k])
	}
	return w.Pairs
}

// rawObject reads the Raw of a malformed envelope that came from a
// key/value entry: a JSON object of strings, as name/value pairs in name
// order.
func rawObject(raw []byte) ([]string, bool) {
	var m map[string]string
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, 2*len(m))
	for _, k := range keys {
		out = append(out, k, m[k])
	}
	return out, true
}

// setField sets name to value in a name/value list, replacing it if there.
func setField(fields []string, name, value string) []string {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == name {
			out := append([]string(nil), fields...)
			out[i+1] = value
			return out
		}
	}
	return append(fields, name, value)
}
