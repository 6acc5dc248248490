package ui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// header lines: title, filter; footer lines: status, keys.
const headerLines, footerLines = 2, 2

func (m *Model) bodyHeight() int {
	h := m.height - headerLines - footerLines - (len(m.statusLines()) - 1)
	if m.showHelp {
		h -= len(m.fullHelpLines())
	}
	if m.mode != inputNone {
		h -= len(m.inputs) + 1
	}
	return max(h, 3)
}

// listHeight is the rows a list shows below its header line.
func (m *Model) listHeight() int { return max(m.bodyHeight()-1, 1) }

func (m *Model) fullHelpLines() []string {
	var groups [][]report.KeyHint
	for _, g := range (helpKeys{m.keys, m.screen}).FullHelp() {
		groups = append(groups, hints(g))
	}
	return m.deps.Styles.KeyColumns(groups, m.width)
}

func hints(bs []key.Binding) []report.KeyHint {
	out := make([]report.KeyHint, len(bs))
	for i, b := range bs {
		out[i] = report.KeyHint{Key: b.Help().Key, Desc: b.Help().Desc}
	}
	return out
}

// View draws the screen on the alternate screen, so that quitting gives
// the terminal back as it was.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	return v
}

// render draws the screen. Every line fits the terminal's width.
func (m *Model) render() string {
	st := m.deps.Styles
	w := m.width
	var b strings.Builder
	crumbs := "categories"
	switch m.screen {
	case screenEntries:
		crumbs += " › " + m.category
	case screenTemplates:
		crumbs += " › " + m.category + " › templates"
	case screenTemplateEntries:
		crumbs += " › " + m.category + " › " + m.templateTitle()
	case screenEnvelope:
		if m.envFrom == screenTemplateEntries {
			crumbs += " › " + m.category + " › " + m.templateTitle() + " › " + m.item.Envelope.ID
		} else {
			crumbs += " › " + m.category + " › " + m.item.Envelope.ID
		}
	}
	b.WriteString(st.Title(report.TUITitle(m.deps.Source, crumbs, w)))
	b.WriteByte('\n')
	b.WriteString(st.Dim(report.TUILine("filter: "+m.filter.String(), w)))
	b.WriteByte('\n')

	var body string
	switch m.screen {
	case screenCategories:
		body = m.categoriesView()
	case screenEntries:
		body = m.entriesView()
	case screenEnvelope:
		body = m.envelopeView()
	case screenTemplates:
		body = m.templatesView()
	case screenTemplateEntries:
		body = m.templateEntriesView()
	}
	lines := strings.Split(body, "\n")
	h := m.bodyHeight()
	for len(lines) < h {
		lines = append(lines, "")
	}
	b.WriteString(strings.Join(lines[:h], "\n"))
	b.WriteByte('\n')

	if m.mode != inputNone {
		for _, in := range m.inputs {
			b.WriteString(in.View())
			b.WriteByte('\n')
		}
		hint := "enter: make the plan · esc: cancel"
		if m.mode == inputFilter {
			hint = "tab: next field · enter: apply · esc: cancel"
		}
		if m.inputErr != "" {
			b.WriteString(st.Bad(report.TUILine(m.inputErr, w)))
		} else {
			b.WriteString(st.Dim(report.TUILine(hint, w)))
		}
		b.WriteByte('\n')
	}
	b.WriteString(m.statusLine())
	b.WriteByte('\n')
	if m.showHelp {
		b.WriteString(strings.Join(m.fullHelpLines(), "\n"))
		b.WriteByte('\n')
	}
	// Help and quit close every screen's key line: they always show.
	b.WriteString(m.deps.Styles.KeyLine(hints(helpKeys{m.keys, m.screen}.ShortHelp()), 2, m.width))
	return b.String()
}

// maxStatusLines bounds a wrapped status: a plan's path and next command
// must be readable whole, and still leave the list on screen.
const maxStatusLines = 4

func (m *Model) statusLines() []string {
	if m.status == "" {
		return []string{""}
	}
	lines := report.TUIWrap(m.status, m.width)
	return lines[:min(len(lines), maxStatusLines)]
}

func (m *Model) statusLine() string {
	st, w := m.deps.Styles, m.width
	if m.status != "" {
		style := st.Bad
		if m.statusOK {
			style = st.Good
		}
		lines := m.statusLines()
		for i, l := range lines {
			lines[i] = style(l)
		}
		return strings.Join(lines, "\n")
	}
	switch m.screen {
	case screenCategories:
		return m.progressLine()
	case screenTemplates:
		if m.tmpl.err != nil {
			return st.Bad(report.TUILine(m.templatesStatus(), w))
		}
		return st.Dim(report.TUILine(m.templatesStatus(), w))
	case screenTemplateEntries:
		if m.tmpl.itemsErr != nil {
			return st.Bad(report.TUILine(m.templateEntriesStatus(), w))
		}
		return st.Dim(report.TUILine(m.templateEntriesStatus(), w))
	case screenEntries:
		switch {
		case m.pageErr != nil:
			return st.Bad(report.TUILine("read failed: "+m.pageErr.Error(), w))
		case m.waiting:
			return st.Dim(report.TUILine("waiting for the first pass of the scan: conflicts decide categories · "+m.progressText(), w))
		case m.loading:
			return st.Dim(report.TUILine("reading a page…", w))
		}
		first := len(m.prev)*m.deps.PageSize + 1
		text := fmt.Sprintf("page %d · entries %d–%d", len(m.prev)+1, first, first+len(m.items)-1)
		if len(m.items) == 0 {
			text = fmt.Sprintf("page %d · no entries", len(m.prev)+1)
		}
		if m.next != "" {
			text += " · ] next page"
		}
		if len(m.prev) > 0 {
			text += " · [ previous"
		}
		return st.Dim(report.TUILine(text, w))
	}
	if m.envErr != nil {
		return st.Bad(report.TUILine("reload failed: "+m.envErr.Error(), w))
	}
	text := "v reveals personal data in the payload, esc goes back"
	if !m.envRead.IsZero() {
		text = "read again from the DLQ at " + m.envRead.UTC().Format("15:04:05") + " · " + text
	}
	return st.Dim(report.TUILine(text, w))
}

func (m *Model) progressLine() string {
	st, w := m.deps.Styles, m.width
	if m.scanErr != nil {
		return st.Bad(report.TUILine("scan failed: "+m.scanErr.Error(), w))
	}
	return st.Dim(report.TUILine(m.progressText(), w))
}

// progressText says how far the categories scan is.
func (m *Model) progressText() string {
	of := ""
	if m.total >= 0 {
		of = " of " + report.Thousands(m.total)
	}
	selected := 0
	for _, r := range m.rows {
		selected += r.Count
	}
	switch {
	case !m.scanDone && m.pass == 2:
		return fmt.Sprintf("conflicts found: recounting… %s%s entries", report.Thousands(int64(m.seen)), of)
	case !m.scanDone:
		return fmt.Sprintf("scanning… %s%s entries read, %s selected", report.Thousands(int64(m.seen)), of, report.Thousands(int64(selected)))
	}
	return fmt.Sprintf("scan complete: %s entries read, %s selected in %d categories", report.Thousands(int64(m.seen)), report.Thousands(int64(selected)), len(m.rows))
}

func (m *Model) categoriesView() string {
	if len(m.rows) == 0 {
		if m.scanDone && m.scanErr == nil {
			return "  nothing selected: the DLQ is empty or the filter matches nothing"
		}
		return ""
	}
	cols := []report.TUIColumn{
		{Name: "category", Keep: true}, {Name: "disposition", Keep: true},
		{Name: "count", Right: true, Keep: true}, {Name: "oldest", Right: true, Keep: true},
		{Name: "example error", Min: 10},
	}
	rows := make([][]string, len(m.rows))
	for i, r := range m.rows {
		rows[i] = []string{r.Name, r.Disposition, report.Thousands(int64(r.Count)), report.FormatAge(r.OldestAge), r.ExampleError}
	}
	m.catTop = scrollTop(m.catTop, m.catCursor, m.listHeight())
	return m.deps.Styles.TUIList(cols, rows, m.catCursor, m.catTop, m.listHeight(), m.width)
}

func (m *Model) entriesView() string {
	if len(m.items) == 0 {
		if !m.loading && !m.waiting && m.pageErr == nil {
			return "  no entries on this page"
		}
		return ""
	}
	return m.itemList(m.items, m.entCursor, &m.entTop)
}

func (m *Model) templateEntriesView() string {
	t := &m.tmpl
	if len(t.items) == 0 {
		if !t.itemsBusy && t.itemsErr == nil {
			return "  no entries on this page"
		}
		return ""
	}
	return m.itemList(t.items, t.iCursor, &t.iTop)
}

// itemList draws a page of entries, scrolled to show the cursor.
func (m *Model) itemList(items []inspect.Item, cursor int, top *int) string {
	cols := []report.TUIColumn{
		{Name: "id", Keep: true}, {Name: "event id", Keep: true},
		{Name: "age", Right: true, Keep: true}, {Name: "att", Right: true, Keep: true},
		{Name: "origin", Min: 6}, {Name: "error", Min: 10},
	}
	now := m.walker.Now
	rows := make([][]string, len(items))
	for i, it := range items {
		e := it.Envelope
		age := "-" // no dead_lettered_at: unknown, not brand new
		if !e.DeadLetteredAt.IsZero() {
			age = report.FormatAge(inspect.Age(e, now))
		}
		rows[i] = []string{e.ID, e.EventID, age, strconv.Itoa(e.Attempts), e.Origin.Topic, errorText(e)}
	}
	*top = scrollTop(*top, cursor, m.listHeight())
	return m.deps.Styles.TUIList(cols, rows, cursor, *top, m.listHeight(), m.width)
}

func scrollTop(top, cursor, height int) int {
	if cursor < top {
		return cursor
	}
	if cursor >= top+height {
		return cursor - height + 1
	}
	return top
}

func (m *Model) envelopeView() string {
	if m.envLines == nil {
		m.envLines = m.envelopeLines()
	}
	h := m.bodyHeight()
	m.envTop = clamp(m.envTop, 0, max(len(m.envLines)-h, 0))
	return strings.Join(m.envLines[m.envTop:min(len(m.envLines), m.envTop+h)], "\n")
}

// envelopeLines lays out one envelope like `dlqctl show`, wrapped to the
// terminal, with the payload redacted unless revealed.
func (m *Model) envelopeLines() []string {
	st, w := m.deps.Styles, m.width
	e, c := m.item.Envelope, m.item.Class
	now := m.walker.Now
	var out []string
	field := func(k, v string) {
		if v == "" {
			return
		}
		// The longest key of an envelope, first_received_at; a property's
		// longer name goes on a line of its own.
		const keyWidth = 17
		out = append(out, st.TUIField(k, v, keyWidth, w)...)
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		if t.After(now) {
			return t.UTC().Format(time.RFC3339) + " (in " + report.FormatAge(t.Sub(now)) + ")"
		}
		return t.UTC().Format(time.RFC3339) + " (" + report.FormatAge(now.Sub(t)) + " ago)"
	}
	field("id", e.ID)
	field("event_id", e.EventID)
	field("fingerprint", fmt.Sprintf("%s (%s)", e.Fingerprint, fingerprintStatus(e)))
	field("category", fmt.Sprintf("%s → %s", c.Category, c.Disposition))
	field("rule", fmt.Sprintf("%s: %s", c.Rule, c.Reason))
	field("malformed", e.Malformed)
	origin := e.Origin.Backend + ":" + e.Origin.Topic
	if e.Origin.Subscription != "" {
		origin += " group " + e.Origin.Subscription
	}
	if e.Origin.Consumer != "" {
		origin += " consumer " + e.Origin.Consumer
	}
	field("origin", origin)
	field("key", e.Key)
	field("attempts", strconv.Itoa(e.Attempts))
	field("last_error", e.LastError)
	field("error_class", e.ErrorClass)
	field("first_received_at", at(e.FirstReceivedAt))
	field("dead_lettered_at", at(e.DeadLetteredAt))
	field("owner", e.Owner)
	recover := at(e.RecoverBy)
	if inspect.IsOverdue(e, now) {
		recover += " overdue"
	}
	field("recover_by", recover)
	field("payload_version", e.PayloadVersion)
	field("schema_info", e.SchemaInfo)
	field("content_type", e.ContentType)
	if e.RedriveCount > 0 {
		field("redrive_count", strconv.Itoa(e.RedriveCount))
	}
	keys := make([]string, 0, len(e.Properties))
	for k := range e.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field("properties."+k, e.Properties[k])
	}
	out = append(out, "")
	title := "payload (personal data hidden; v reveals)"
	shown := m.deps.Redactor.Envelope(e)
	if m.reveal {
		title, shown = "payload (revealed; v hides)", e
	}
	out = append(out, st.Label(title))
	out = append(out, report.TUIWrap(payloadText(shown), w)...)
	return out
}

// fingerprintStatus is the verification `dlqctl show` reports; a malformed
// entry's payload may not be the real one, so it cannot be vouched for.
func fingerprintStatus(e envelope.Envelope) string {
	if e.Malformed != "" && e.Fingerprint == "" {
		return envelope.FingerprintUnverifiable
	}
	return e.VerifyFingerprint()
}

func payloadText(e envelope.Envelope) string {
	switch e.PayloadEncoding {
	case envelope.EncodingJSON:
		var buf bytes.Buffer
		if json.Indent(&buf, e.Payload, "", "  ") == nil {
			return buf.String()
		}
		return string(e.Payload)
	case envelope.EncodingUTF8:
		return string(e.Payload)
	}
	return fmt.Sprintf("(%d bytes, base64) %s", len(e.Payload), base64.StdEncoding.EncodeToString(e.Payload))
}
