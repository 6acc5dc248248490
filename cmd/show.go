package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// showOptions is what show shows and with what: the entry asked for, the
// flags, the output settings resolved for the invocation, and how it opens
// the source.
type showOptions struct {
	IO     *IOStreams
	Report report.Options
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)

	// Ref is the argument: an entry id or an event ID.
	Ref    string
	reveal bool
	redact []string
}

// newShowCmd builds show; runF, when not nil, runs instead of runShow.
func newShowCmd(f *Factory, runF func(context.Context, *showOptions) error) *cobra.Command {
	opts := &showOptions{}
	c := &cobra.Command{
		Use:   "show ID|EVENT_ID",
		Short: "Show one envelope in full, with fingerprint check and category",
		Long: `Show one envelope in full: every field, the payload, whether a carried
sha256 fingerprint matches the payload, and the category with the rule that
chose it. The argument is an entry id (the backend's locator) or an event ID;
when an event ID has several entries, the first is shown and the others named.

Personal data in the payload is redacted in every format — on a terminal,
piped, in JSON and in markdown — as sample and ui redact it (email, phone,
a person's name, address, card, ssn, password, token, plus --redact), so
that show can be pasted or piped into a ticket as it is. --reveal shows the
payload whole; the fingerprint is always the stored payload's.`,
		Example: `  dlqctl show 20261129T083821Z-0027
  dlqctl show evt-7ab4c1b91885 --reveal
  dlqctl show evt-7ab4c1b91885 -o markdown --redact orderId`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.IO, opts.Report, opts.OpenSession = f.IO, f.reportOptions(), f.openSession
			opts.Ref = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runShow(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.reveal, "reveal", false, "show personal data in the payload (redacted in every format without it)")
	c.Flags().StringSliceVar(&opts.redact, "redact", nil, "more payload fields to redact: a key (anywhere) or a dotted path from the root")
	return c
}

// ShowDoc is dlqctl.show/v1.
type ShowDoc struct {
	Schema            string            `json:"schema"`
	Envelope          envelope.Envelope `json:"envelope"`
	FingerprintStatus string            `json:"fingerprint_status"`
	Category          string            `json:"category"`
	Disposition       string            `json:"disposition"`
	Rule              string            `json:"rule"`
	Reason            string            `json:"reason"`
	AgeSeconds        *int64            `json:"age_seconds"`
	Overdue           bool              `json:"overdue"`
	// Others are the ids of other entries with the same event_id.
	Others []string `json:"others"`
	// PayloadRedacted says that personal data in Envelope's payload was
	// replaced (all but --reveal); the fingerprint is the stored one's.
	PayloadRedacted bool `json:"payload_redacted"`
}

func runShow(ctx context.Context, opts *showOptions) error {
	ref := opts.Ref
	s, err := opts.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	matches, err := findEntries(ctx, s.src, ref)
	if err != nil {
		return err
	}
	conflicts, err := s.walker.Conflicts(ctx)
	if err != nil {
		return err
	}
	e := matches[0]
	c := s.walker.Classifier.Classify(e, conflicts.IsConflict(e.EventID))
	doc := ShowDoc{
		Schema: "dlqctl.show/v1", Envelope: e, FingerprintStatus: fingerprintStatus(e),
		Category: c.Category, Disposition: c.Disposition, Rule: c.Rule, Reason: c.Reason,
		AgeSeconds: ageSeconds(e, s.walker.Now), Overdue: inspect.IsOverdue(e, s.walker.Now),
		Others: []string{},
	}
	for _, m := range matches[1:] {
		doc.Others = append(doc.Others, m.ID)
	}
	// Everything is computed from the entry as stored; only what is shown
	// is redacted, in every format: a piped show goes into tickets too.
	shown, payloadKey := e, "payload"
	var red *inspect.Redactor
	if !opts.reveal {
		r := inspect.NewRedactor(opts.redact)
		red = &r
		shown, payloadKey = r.Envelope(e), "payload (personal data redacted; --reveal shows it)"
		doc.PayloadRedacted = true
	}
	ro := opts.Report
	jsonDoc := doc
	jsonDoc.Envelope = shown
	if done, err := emitJSON(opts.IO.Out, ro.Format, jsonDoc); done {
		return err
	}
	fields := showFields(doc, shown, payloadKey)
	if c.Category == envelope.CategoryConflict {
		diff, other, err := conflictDiff(ctx, s.src, e, matches, red)
		if err != nil {
			return err
		}
		if other != "" {
			fields = append(fields, report.Field{Key: "conflicts with", Value: other})
			for _, d := range diff {
				fields = append(fields, report.Field{Key: "differs: " + d.path, Value: d.this + "  ≠  " + d.other})
			}
		}
	}
	return report.WriteFields(opts.IO.Out, "", fields, ro)
}

// findEntries is the entry whose id is ref, or else every entry whose
// event_id is ref, in DLQ order; none is an error naming the DLQ.
func findEntries(ctx context.Context, src backend.Source, ref string) ([]envelope.Envelope, error) {
	var matches []envelope.Envelope
	e, err := src.Get(ctx, ref)
	switch {
	case err == nil:
		matches = append(matches, e)
	case errors.Is(err, backend.ErrNotFound):
		err = src.Scan(ctx, "", func(e envelope.Envelope) error {
			if e.EventID == ref {
				matches = append(matches, e)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	if len(matches) == 0 {
		// The argument names nothing there (a typo, or an entry moved
		// since): not a failure to read the DLQ, which is exit 1.
		return nil, usageErrorf("%q: no entry with that id or event_id in %s", ref, src)
	}
	return matches, nil
}

// showFields are the fields of one entry as show prints them: the entry's
// own from e (as stored), its payload and raw bytes from shown (redacted
// unless --reveal), under payloadKey.
func showFields(doc ShowDoc, shown envelope.Envelope, payloadKey string) []report.Field {
	e := doc.Envelope
	fields := []report.Field{
		{Key: "id", Value: e.ID},
		{Key: "event_id", Value: e.EventID},
		{Key: "fingerprint", Value: fmt.Sprintf("%s (%s)", e.Fingerprint, doc.FingerprintStatus)},
		{Key: "category", Value: fmt.Sprintf("%s → %s", doc.Category, doc.Disposition)},
		{Key: "rule", Value: fmt.Sprintf("%s: %s", doc.Rule, doc.Reason)},
		{Key: "origin", Value: originString(e.Origin)},
		{Key: "key", Value: e.Key},
		{Key: "attempts", Value: e.Attempts},
		{Key: "last_error", Value: e.LastError},
		{Key: "error_class", Value: e.ErrorClass},
		{Key: "first_received_at", Value: e.FirstReceivedAt},
		{Key: "dead_lettered_at", Value: e.DeadLetteredAt},
		{Key: "owner", Value: e.Owner},
		{Key: "recover_by", Value: recoverBy(e, doc.Overdue)},
		{Key: "payload_version", Value: e.PayloadVersion},
		{Key: "schema_info", Value: e.SchemaInfo},
		{Key: "content_type", Value: e.ContentType},
		{Key: "redrive_count", Value: e.RedriveCount},
	}
	for _, k := range sortedKeys(e.Properties) {
		fields = append(fields, report.Field{Key: "properties." + k, Value: e.Properties[k]})
	}
	if e.Malformed == "" || len(e.Payload) > 0 {
		fields = append(fields, report.Field{Key: payloadKey, Value: payloadBlock(shown)})
	}
	if e.Malformed != "" {
		fields = append(fields, report.Field{Key: "malformed", Value: e.Malformed})
		switch {
		case len(shown.Raw) > 0:
			fields = append(fields, report.Field{Key: "raw", Value: escapeBytes(shown.Raw)})
		case len(e.Raw) > 0:
			fields = append(fields, report.Field{Key: "raw", Value: fmt.Sprintf("(%d bytes, hidden: they may hold personal data; --reveal shows them)", len(e.Raw))})
		}
	}
	if len(doc.Others) > 0 {
		fields = append(fields, report.Field{Key: "same event_id", Value: joinOr(doc.Others, "")})
	}
	return fields
}

// fingerprintStatus is the verification result; a malformed entry's
// payload may not be the real one, so it cannot be vouched for.
func fingerprintStatus(e envelope.Envelope) string {
	if e.Malformed != "" && e.Fingerprint == "" {
		return envelope.FingerprintUnverifiable
	}
	return e.VerifyFingerprint()
}

func recoverBy(e envelope.Envelope, overdue bool) any {
	if e.RecoverBy.IsZero() {
		return ""
	}
	if overdue {
		return e.RecoverBy.UTC().Format(time.RFC3339) + " (overdue)"
	}
	return e.RecoverBy
}

func originString(o envelope.Origin) string {
	s := o.Backend + ":" + o.Topic
	if o.Subscription != "" {
		s += " group " + o.Subscription
	}
	if o.Consumer != "" {
		s += " consumer " + o.Consumer
	}
	return s
}

// payloadBlock shows a payload for people: JSON indented, one line per
// line (compact when piped), text as is, binary as base64 with its size.
// Nothing is cut: -o table piped and markdown show it all.
func payloadBlock(e envelope.Envelope) any {
	switch e.PayloadEncoding {
	case envelope.EncodingJSON:
		var buf, flat bytes.Buffer
		if json.Indent(&buf, e.Payload, "", "  ") == nil && json.Compact(&flat, e.Payload) == nil {
			return report.Block{Lines: strings.Split(buf.String(), "\n"), Flat: flat.String(), Lang: "json"}
		}
	case envelope.EncodingUTF8:
		return report.Block{Lines: strings.Split(string(e.Payload), "\n"), Flat: string(e.Payload)}
	}
	return fmt.Sprintf("(%d bytes, base64) %s", len(e.Payload), encodeBase64(e.Payload))
}

// escapeBytes shows raw bytes as Go-escaped text (\x00, \n, \u202e), so a
// malformed entry's bytes can be read and compared without reaching the
// terminal as control sequences.
func escapeBytes(b []byte) string {
	q := strconv.QuoteToASCII(string(b))
	if utf8.Valid(b) {
		q = strconv.QuoteToGraphic(string(b))
	}
	return q[1 : len(q)-1]
}

// ageSeconds is the entry's age, or nil when it has no dead-letter time.
func ageSeconds(e envelope.Envelope, now time.Time) *int64 {
	if e.DeadLetteredAt.IsZero() {
		return nil
	}
	a := int64(inspect.Age(e, now) / time.Second)
	return &a
}

type fieldDiff struct{ path, this, other string }

// conflictDiff finds another entry with e's event_id and a different
// fingerprint and names the payload fields that differ, so the operator
// sees what the two versions disagree on. It scans the DLQ when the entry
// was looked up by id. With red, a differing field that is personal data
// is named but its values are shown redacted.
func conflictDiff(ctx context.Context, src backend.Source, e envelope.Envelope, known []envelope.Envelope, red *inspect.Redactor) ([]fieldDiff, string, error) {
	var other *envelope.Envelope
	pick := func(o envelope.Envelope) bool {
		if o.ID != e.ID && o.EventID == e.EventID && o.Fingerprint != e.Fingerprint {
			other = &o
			return true
		}
		return false
	}
	for _, o := range known {
		if pick(o) {
			break
		}
	}
	if other == nil && e.EventID != "" {
		errFound := errors.New("found")
		err := src.Scan(ctx, "", func(o envelope.Envelope) error {
			if pick(o) {
				return errFound
			}
			return nil
		})
		if err != nil && !errors.Is(err, errFound) {
			return nil, "", err
		}
	}
	if other == nil {
		return nil, "", nil
	}
	a, b := flatten(e.Payload), flatten(other.Payload)
	shownA, shownB := a, b
	if red != nil {
		shownA, shownB = flatten(red.Envelope(e).Payload), flatten(red.Envelope(*other).Payload)
	}
	// A leaf under a redacted object is gone from the redacted payload.
	value := func(orig, shown map[string]string, k string) string {
		if orig[k] == "" {
			return "(absent)"
		}
		if v, ok := shown[k]; ok {
			return v
		}
		return strconv.Quote(inspect.Redacted)
	}
	var diff []fieldDiff
	for _, k := range sortedKeys(union(a, b)) {
		if a[k] != b[k] {
			diff = append(diff, fieldDiff{k, value(a, shownA, k), value(b, shownB, k)})
		}
	}
	return diff, other.ID + " (" + other.Fingerprint + ")", nil
}

func union(a, b map[string]string) map[string]string {
	u := make(map[string]string, len(a)+len(b))
	for k := range a {
		u[k] = ""
	}
	for k := range b {
		u[k] = ""
	}
	return u
}

// flatten maps each leaf of a JSON payload to its compact JSON text, keyed
// by its dotted path; a payload that is not JSON is one leaf, "(payload)".
func flatten(payload []byte) map[string]string {
	var v any
	out := map[string]string{}
	if json.Unmarshal(payload, &v) != nil {
		out["(payload)"] = escapeBytes(payload)
		return out
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(joinPath(prefix, k), c)
			}
			return
		case []any:
			for i, c := range x {
				walk(joinPath(prefix, strconv.Itoa(i)), c)
			}
			return
		}
		b, _ := json.Marshal(v)
		out[orRoot(prefix)] = string(b)
	}
	walk("", v)
	return out
}

func joinPath(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func orRoot(p string) string {
	if p == "" {
		return "(payload)"
	}
	return p
}
