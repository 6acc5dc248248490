package sqsdlq

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// maxAttributes is SQS's limit of message attributes per message.
const maxAttributes = 10

// Import sends e to the DLQ queue and returns its new MessageId.
//
// The body is the payload (as base64 text, with payload_encoding base64,
// when it is not text SQS can carry); the envelope's fields become String
// message attributes under the first of their names, the origin queue
// name under origin_stream, then the properties; dlqctl_source_id keeps
// e.ID. When that makes more than SQS's 10 attributes, event_id,
// fingerprint and dlqctl_source_id stay attributes and everything else
// goes, as one JSON object, in the dlqctl_fields attribute, which
// dlqctl reads back as if each were an attribute. A FIFO DLQ gets the
// envelope's key as MessageGroupId and e.ID as deduplication ID.
//
// An id already present (as a MessageId or a dlqctl_source_id) is refused
// with backend.ErrExists.
func (q *Queue) Import(ctx context.Context, e envelope.Envelope) (string, error) {
	if q.missing {
		return "", backend.Configf("%s: the queue %q does not exist, and import does not create it: create it first, as the DLQ in its source queue's redrive policy (for a rehearsal, the reference worker: go run ./examples/worker --source 'sqs://SOURCE?region=R&endpoint=URL' --create makes SOURCE and SOURCE-dlq)", q, q.src.queue)
	}
	if e.ID != "" {
		has, err := q.Has(ctx, e.ID)
		if err != nil {
			return "", err
		}
		if has {
			return "", fmt.Errorf("import %s: %w in %s", e.ID, backend.ErrExists, q)
		}
	}
	in, err := q.importMessage(e)
	if err != nil {
		return "", err
	}
	out, err := q.c.SendMessage(ctx, in)
	if err != nil {
		return "", q.wrap(ctx, "import "+e.ID, err)
	}
	id := aws.ToString(out.MessageId)
	q.mu.Lock()
	if q.sourceIDs != nil {
		q.sourceIDs[id] = true
		if e.ID != "" {
			q.sourceIDs[e.ID] = true
		}
	}
	q.mu.Unlock()
	return id, nil
}

// Has reports whether id is the MessageId or the dlqctl_source_id of a
// message in the DLQ (one scan on first call, then kept for the life of
// the Queue).
func (q *Queue) Has(ctx context.Context, id string) (bool, error) {
	q.mu.Lock()
	ids := q.sourceIDs
	q.mu.Unlock()
	if ids == nil {
		ids = map[string]bool{}
		err := q.snapshot(ctx, func(st *scanStore) error {
			for i := range st.index {
				m, err := st.message(i)
				if err != nil {
					return err
				}
				ids[aws.ToString(m.MessageId)] = true
				if v := m.MessageAttributes[envelope.ImportedFromProperty].StringValue; v != nil {
					ids[*v] = true
				}
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		q.mu.Lock()
		if q.sourceIDs == nil {
			q.sourceIDs = ids
		}
		ids = q.sourceIDs
		q.mu.Unlock()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return ids[id], nil
}

// sqsText: s can be an SQS body or attribute value (XML 1.0 characters).
func sqsText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

func (q *Queue) importMessage(e envelope.Envelope) (*sqs.SendMessageInput, error) {
	w := envelope.NewFieldWriter(q.names)
	payload, _ := envelope.ImportPayload(e)
	body := string(payload)
	if !sqsText(body) || body == "" {
		if len(payload) == 0 {
			return nil, fmt.Errorf("import %s: SQS cannot hold a message with an empty body", e.ID)
		}
		body = base64.StdEncoding.EncodeToString(payload)
		w.Put(envelope.FieldPayloadEncoding, envelope.EncodingBase64)
	}
	w.Identity(e)
	w.Raw(envelope.ImportedFromProperty, e.ID)
	w.Str(envelope.FieldPayloadVersion, e.PayloadVersion)
	w.Str(envelope.FieldContentType, e.ContentType)
	w.Str(envelope.FieldKey, e.Key)
	w.Origin(e.Origin, "")
	w.History(e)
	q.writeProperties(w, e)
	attrs := q.packAttributes(w)
	for k, v := range attrs {
		if v.StringValue == nil || *v.StringValue == "" {
			// SQS refuses empty attribute values; an empty field reads the
			// same as a missing one.
			delete(attrs, k)
			continue
		}
		if !sqsText(*v.StringValue) {
			return nil, fmt.Errorf("import %s: attribute %q holds characters SQS cannot carry", e.ID, k)
		}
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(body), MessageAttributes: attrs}
	if q.fifo {
		group := e.Key
		if group == "" {
			group = e.EventID
		}
		if group == "" {
			group = "dlqctl-import"
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(dedupKey("import", e.ID, strings.ToLower(e.Fingerprint)))
	}
	return in, nil
}

// writeProperties writes e's properties after its fields, by name, leaving
// out what would read back as an envelope field and SQS's own record of
// the source.
func (q *Queue) writeProperties(w *envelope.FieldWriter, e envelope.Envelope) {
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		if k == SQSSourceArnProperty || k == SQSPackedFields {
			continue // SQS's own record of the source, or dlqctl's packing
		}
		w.Property(k, e.Properties[k])
	}
}

// packAttributes is w's pairs as message attributes; past SQS's limit on
// attributes, all but the event ID, fingerprint and import source go
// packed into one attribute as JSON.
func (q *Queue) packAttributes(w *envelope.FieldWriter) map[string]types.MessageAttributeValue {
	attrs := map[string]types.MessageAttributeValue{}
	if len(w.Pairs)/2 <= maxAttributes {
		for i := 0; i+1 < len(w.Pairs); i += 2 {
			attrs[w.Pairs[i]] = strAttr(w.Pairs[i+1])
		}
	} else {
		keep := map[string]bool{envelope.ImportedFromProperty: true}
		for _, f := range []string{envelope.FieldEventID, envelope.FieldFingerprint} {
			keep[q.names[f][0]] = true
		}
		packed := map[string]string{}
		for i := 0; i+1 < len(w.Pairs); i += 2 {
			if keep[w.Pairs[i]] {
				attrs[w.Pairs[i]] = strAttr(w.Pairs[i+1])
			} else {
				packed[w.Pairs[i]] = w.Pairs[i+1]
			}
		}
		b, _ := json.Marshal(packed) // a map of strings always marshals
		attrs[SQSPackedFields] = strAttr(string(b))
	}
	return attrs
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}
