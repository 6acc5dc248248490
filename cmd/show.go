package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

func newShowCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID|EVENT_ID",
		Short: "Show one envelope in full, with fingerprint check and category",
		Long: `Show one envelope in full: every field, the payload, whether a carried
sha256 fingerprint matches the payload, and the category with the rule that
chose it. The argument is an entry id (the backend's locator) or an event ID;
when an event ID has several entries, the first is shown and the others named.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runShow(c.Context(), f, args[0])
		},
	}
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
	AgeSeconds        int64             `json:"age_seconds"`
	Overdue           bool              `json:"overdue"`
	// Others are the ids of other entries with the same event_id.
	Others []string `json:"others"`
}

func runShow(ctx context.Context, f *Factory, ref string) error {
	s, err := f.openSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	var matches []envelope.Envelope
	e, err := s.src.Get(ctx, ref)
	switch {
	case err == nil:
		matches = append(matches, e)
	case errors.Is(err, backend.ErrNotFound):
		err = s.src.Scan(ctx, "", func(e envelope.Envelope) error {
			if e.EventID == ref {
				matches = append(matches, e)
			}
			return nil
		})
		if err != nil {
			return err
		}
	default:
		return err
	}
	if len(matches) == 0 {
		return fmt.Errorf("%q: no entry with that id or event_id in %s", ref, s.src)
	}
	conflicts, err := s.walker.Conflicts(ctx)
	if err != nil {
		return err
	}
	e = matches[0]
	c := s.walker.Classifier.Classify(e, conflicts.IsConflict(e.EventID))
	doc := ShowDoc{
		Schema: "dlqctl.show/v1", Envelope: e, FingerprintStatus: fingerprintStatus(e),
		Category: c.Category, Disposition: c.Disposition, Rule: c.Rule, Reason: c.Reason,
		AgeSeconds: int64(inspect.Age(e, s.walker.Now) / time.Second), Overdue: inspect.IsOverdue(e, s.walker.Now),
		Others: []string{},
	}
	for _, m := range matches[1:] {
		doc.Others = append(doc.Others, m.ID)
	}
	ro := f.reportOptions()
	switch ro.Format {
	case report.FormatJSON:
		return report.WriteJSON(f.IO.Out, doc)
	case report.FormatNDJSON:
		return report.WriteNDJSON(f.IO.Out, doc)
	}
	fields := []report.Field{
		{Key: "id", Value: e.ID},
		{Key: "event_id", Value: e.EventID},
		{Key: "fingerprint", Value: fmt.Sprintf("%s (%s)", e.Fingerprint, doc.FingerprintStatus)},
		{Key: "category", Value: fmt.Sprintf("%s → %s", c.Category, c.Disposition)},
		{Key: "rule", Value: fmt.Sprintf("%s: %s", c.Rule, c.Reason)},
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
	fields = append(fields, report.Field{Key: "payload", Value: payloadPreview(e, ro.TTY)})
	if len(doc.Others) > 0 {
		fields = append(fields, report.Field{Key: "same event_id", Value: joinOr(doc.Others, "")})
	}
	return report.WriteFields(f.IO.Out, "", fields, ro)
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

// payloadPreview shows a payload for people: JSON indented on a terminal
// and compact when piped, text as is, binary as base64 with its size;
// report truncates what is too long.
func payloadPreview(e envelope.Envelope, tty bool) string {
	switch e.PayloadEncoding {
	case envelope.EncodingJSON:
		if !tty {
			return string(e.Payload)
		}
		var buf bytes.Buffer
		if json.Indent(&buf, e.Payload, "", "  ") == nil {
			return buf.String()
		}
	case envelope.EncodingUTF8:
		return string(e.Payload)
	}
	return fmt.Sprintf("(%d bytes, base64) %s", len(e.Payload), encodeBase64(e.Payload))
}
