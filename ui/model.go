// Package ui is dlqctl's interactive browser (dlqctl ui): categories, the
// entries of one category (or its error templates and the entries of one
// template), one envelope. It reads only through
// backend.Source (via inspect.Walker), never holds a whole DLQ, and never
// moves anything: `p` writes a plan through the same planner as
// `dlqctl redrive plan`, which the command layer hands in.
package ui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

type screen int

const (
	screenCategories screen = iota
	screenEntries
	screenEnvelope
	screenTemplates
	screenTemplateEntries
)

// Filter is what `/` edits: the selectors that narrow every screen and
// every plan made from it.
type Filter struct {
	Error    string // regular expression over last_error
	EventIDs []string
	Origins  []string
	Owners   []string
}

func (f Filter) String() string {
	var parts []string
	if f.Error != "" {
		parts = append(parts, "error~/"+f.Error+"/")
	}
	if len(f.EventIDs) > 0 {
		parts = append(parts, "event="+strings.Join(f.EventIDs, ","))
	}
	if len(f.Origins) > 0 {
		parts = append(parts, "origin="+strings.Join(f.Origins, ","))
	}
	if len(f.Owners) > 0 {
		parts = append(parts, "owner="+strings.Join(f.Owners, ","))
	}
	if len(parts) == 0 {
		return "none (/ to filter)"
	}
	return strings.Join(parts, " ")
}

// PlanResult is what the planner reports back for the status line.
type PlanResult struct {
	Path     string
	Entries  int
	Excluded int
	// Next is the command to run next (the UI never approves or applies).
	Next string
}

// Deps is what the browser needs; the command layer builds it.
type Deps struct {
	// Walker reads and classifies; its Now is renewed on every reload.
	Walker inspect.Walker
	// Selector turns the filter and a category ("" for the categories
	// screen) into the selection, the same way the plan does, so that a
	// plan holds exactly what the screen showed.
	Selector func(f Filter, category string) (inspect.Selector, error)
	// Plan makes and writes a redrive plan of that selection.
	Plan func(ctx context.Context, f Filter, category, reason string) (PlanResult, error)
	// Filter and Reason are the starting values (from the flags).
	Filter Filter
	Reason string
	// Source names the DLQ in the title (password already hidden).
	Source   string
	Styles   report.TUI
	Redactor inspect.Redactor
	// PageSize is how many entries the entries screen reads at a time.
	PageSize int
	Now      func() time.Time
}

type inputMode int

const (
	inputNone inputMode = iota
	inputFilter
	inputReason
)

// Model is the browser's state. It keeps the root context because every
// read it starts is a tea.Cmd that runs after Update has returned, and
// must still stop when the command is interrupted.
type Model struct {
	ctx  context.Context
	deps Deps
	src  *oneAtATime
	keys keyMap

	width, height int
	screen        screen
	showHelp      bool
	filter        Filter
	walker        inspect.Walker

	// categories screen: the scan in flight or done
	gen        int
	cancelScan context.CancelFunc
	rows       []catRow
	seen       int
	total      int64
	pass       int
	scanDone   bool
	scanErr    error
	conflicts  *envelope.ConflictTracker
	catCursor  int
	catTop     int

	// entries screen: one page of one category
	category   string
	items      []inspect.Item
	after      string   // cursor the page was read after
	prev       []string // cursors of the pages before it
	next       string
	pageGen    int
	cancelPage context.CancelFunc
	loading    bool
	waiting    bool // for the scan's conflict tracker
	pageErr    error
	entCursor  int
	entTop     int
	pageTook   time.Duration

	// templates screens
	tmpl templatesState

	// envelope screen, and the screen it was opened from
	envFrom  screen
	item     inspect.Item
	reveal   bool
	envTop   int
	envErr   error
	envRead  time.Time // when r last read it again
	envLines []string  // laid out once per envelope, width and reveal

	// prompts
	mode     inputMode
	inputs   []textinput.Model
	focus    int
	inputErr string

	status   string
	statusOK bool
	planning bool
}

// New builds the browser's model; Run runs it.
func New(ctx context.Context, d Deps) *Model {
	if d.PageSize <= 0 {
		d.PageSize = 50
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	m := &Model{ctx: ctx, deps: d, keys: newKeyMap(), width: 80, height: 24, filter: d.Filter, total: -1}
	m.src = newOneAtATime(d.Walker.Source)
	m.deps.Walker.Source = m.src
	return m
}

// Init starts the categories scan.
func (m *Model) Init() tea.Cmd { return m.startScan() }

func (m *Model) startScan() tea.Cmd {
	if m.cancelScan != nil {
		m.cancelScan()
	}
	m.gen++
	m.rows, m.seen, m.total, m.pass, m.scanDone, m.scanErr, m.conflicts = nil, 0, -1, 1, false, nil, nil
	sel, err := m.deps.Selector(m.filter, "")
	if err != nil {
		m.scanDone, m.scanErr = true, err
		return nil
	}
	m.walker = m.deps.Walker
	m.walker.Now = m.deps.Now()
	ctx, cancel := context.WithCancel(m.ctx)
	m.cancelScan = cancel
	ch := make(chan scanMsg, 1)
	w, gen := m.walker, m.gen
	go func() {
		defer close(ch)
		runScan(ctx, w, sel, gen, ch)
	}()
	return waitScan(ch)
}

// scanEnvelope carries the channel along with each message, so that the
// next wait reads from the same scan.
type scanEnvelope struct {
	msg scanMsg
	ch  <-chan scanMsg
}

func waitScan(ch <-chan scanMsg) tea.Cmd {
	return func() tea.Msg {
		msg, ok := <-ch
		if !ok {
			return nil
		}
		return scanEnvelope{msg: msg, ch: ch}
	}
}

type pageMsg struct {
	gen   int
	items []inspect.Item
	next  string
	err   error
}

func (m *Model) loadPage() tea.Cmd {
	if m.cancelPage != nil {
		m.cancelPage()
	}
	m.pageGen++
	m.pageErr = nil
	if m.conflicts == nil {
		// A category depends on every other entry with the same event ID;
		// until the first pass has seen them all, a page could misfile one.
		m.waiting, m.loading = true, false
		return nil
	}
	m.waiting, m.loading = false, true
	sel, err := m.deps.Selector(m.filter, m.category)
	if err != nil {
		m.loading, m.pageErr = false, err
		return nil
	}
	sel.Limit = m.deps.PageSize
	ctx, cancel := context.WithCancel(m.ctx)
	m.cancelPage = cancel
	w, conflicts, after, gen := m.walker, m.conflicts, m.after, m.pageGen
	return func() tea.Msg {
		var items []inspect.Item
		next, err := w.Walk(ctx, conflicts, sel, after, func(it inspect.Item) error {
			items = append(items, it)
			return nil
		})
		return pageMsg{gen: gen, items: items, next: next, err: err}
	}
}

type getMsg struct {
	id   string
	item inspect.Item
	err  error
}

func (m *Model) reloadEnvelope() tea.Cmd {
	id, w, conflicts := m.item.Envelope.ID, m.walker, m.conflicts
	ctx := m.ctx
	return func() tea.Msg {
		e, err := w.Source.Get(ctx, id)
		if err != nil {
			return getMsg{id: id, err: err}
		}
		conflict := conflicts != nil && conflicts.IsConflict(e.EventID)
		return getMsg{id: id, item: inspect.Item{Envelope: e, Class: w.Classifier.Classify(e, conflict)}}
	}
}

type planMsg struct {
	res PlanResult
	err error
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.envLines = nil
		return m, nil
	case scanEnvelope:
		return m, m.onScan(msg)
	case pageMsg:
		if msg.gen != m.pageGen {
			return m, nil
		}
		m.loading = false
		m.items, m.next, m.pageErr = msg.items, msg.next, msg.err
		m.entCursor = clamp(m.entCursor, 0, max(len(m.items)-1, 0))
		return m, nil
	case templatesMsg:
		m.onTemplates(msg)
		return m, nil
	case templateItemsMsg:
		m.onTemplateItems(msg)
		return m, nil
	case getMsg:
		if m.screen == screenEnvelope && msg.id == m.item.Envelope.ID {
			m.envErr = msg.err
			if msg.err == nil {
				m.item, m.envRead = msg.item, m.deps.Now()
			}
			m.envLines = nil
		}
		return m, nil
	case planMsg:
		m.planning = false
		if msg.err != nil {
			m.status, m.statusOK = "plan not written: "+msg.err.Error(), false
		} else {
			m.status = fmt.Sprintf("plan written: %s, %d left out: %s. Next: %s", entries(msg.res.Entries), msg.res.Excluded, msg.res.Path, msg.res.Next)
			m.statusOK = true
		}
		return m, nil
	case tea.PasteMsg:
		// Pasted text is text: it goes into an open prompt, and is never
		// taken for keys.
		if m.mode != inputNone {
			var cmd tea.Cmd
			m.inputs[m.focus], cmd = m.inputs[m.focus].Update(msg)
			return m, cmd
		}
		return m, nil
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" {
			return m, m.quit()
		}
		if m.mode != inputNone {
			return m, m.updateInput(msg)
		}
		if msg.Code == tea.KeyEscape && msg.Mod == tea.ModAlt {
			// Esc pressed twice faster than the terminal is read arrives
			// as one alt+esc: it is still two presses.
			esc := tea.KeyPressMsg{Code: tea.KeyEscape}
			return m, tea.Batch(m.onKey(esc), m.onKey(esc))
		}
		if rs := []rune(msg.Text); len(rs) > 1 && msg.Mod == 0 {
			// Text that arrives as one key ("jj") is still one key press
			// per character.
			var cmds []tea.Cmd
			for _, r := range rs {
				cmds = append(cmds, m.onKey(tea.KeyPressMsg{Code: r, Text: string(r)}))
				if m.mode != inputNone {
					break // a key that opened a prompt; the rest is not keys
				}
			}
			return m, tea.Batch(cmds...)
		}
		return m, m.onKey(msg)
	}
	return m, nil
}

func (m *Model) quit() tea.Cmd {
	if m.cancelScan != nil {
		m.cancelScan()
	}
	if m.cancelPage != nil {
		m.cancelPage()
	}
	if m.tmpl.cancel != nil {
		m.tmpl.cancel()
	}
	return tea.Quit
}

func (m *Model) onScan(env scanEnvelope) tea.Cmd {
	msg := env.msg
	if msg.gen != m.gen {
		return nil // a scan that a reload or a new filter replaced
	}
	m.seen, m.total, m.pass = msg.seen, msg.total, msg.pass
	if msg.rows != nil {
		// Rows are ordered by count, which a running scan changes: the
		// cursor stays on the category it was on, not on its old row.
		var on string
		if m.catCursor < len(m.rows) {
			on = m.rows[m.catCursor].Name
		}
		m.rows = msg.rows
		m.catCursor = clamp(m.catCursor, 0, max(len(m.rows)-1, 0))
		for i, r := range m.rows {
			if r.Name == on {
				m.catCursor = i
				break
			}
		}
	}
	var cmd tea.Cmd
	if msg.conflicts != nil && m.conflicts == nil {
		m.conflicts = msg.conflicts
		if m.waiting {
			cmd = m.loadPage()
		}
	}
	if msg.done {
		m.scanDone, m.scanErr = true, msg.err
		return cmd
	}
	return tea.Batch(cmd, waitScan(env.ch))
}

// onKey handles a key: quit and help on every screen, the rest by the
// screen shown.
func (m *Model) onKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Help):
		m.showHelp = !m.showHelp
		return nil
	}
	switch m.screen {
	case screenCategories:
		return m.onCategoriesKey(msg)
	case screenEntries:
		return m.onEntriesKey(msg)
	case screenTemplates:
		return m.onTemplatesKey(msg)
	case screenTemplateEntries:
		return m.onTemplateEntriesKey(msg)
	case screenEnvelope:
		return m.onEnvelopeKey(msg)
	}
	return nil
}

// onCategoriesKey handles a key on the list of categories.
func (m *Model) onCategoriesKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Enter):
		if len(m.rows) == 0 {
			return nil
		}
		m.screen, m.category = screenEntries, m.rows[m.catCursor].Name
		m.items, m.after, m.prev, m.next, m.entCursor, m.entTop = nil, "", nil, "", 0, 0
		return m.loadPage()
	case key.Matches(msg, k.Templates):
		if len(m.rows) == 0 {
			return nil
		}
		m.category = m.rows[m.catCursor].Name
		m.items, m.after, m.prev, m.next, m.entCursor, m.entTop = nil, "", nil, "", 0, 0
		return m.openTemplates()
	case key.Matches(msg, k.Filter):
		m.openFilter()
	case key.Matches(msg, k.Plan):
		m.openReason()
	case key.Matches(msg, k.Reload):
		m.status = ""
		return m.startScan()
	default:
		m.catCursor = m.move(msg, m.catCursor, len(m.rows))
	}
	return nil
}

// onEntriesKey handles a key on a category's page of entries.
func (m *Model) onEntriesKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Back):
		m.screen, m.waiting, m.loading = screenCategories, false, false
		if m.cancelPage != nil {
			m.cancelPage()
		}
	case key.Matches(msg, k.Enter):
		if len(m.items) == 0 || m.loading {
			return nil
		}
		m.item, m.reveal, m.envTop, m.envErr, m.envLines, m.envRead = m.items[m.entCursor], false, 0, nil, nil, time.Time{}
		m.envFrom, m.screen = screenEntries, screenEnvelope
	case key.Matches(msg, k.Templates):
		if m.cancelPage != nil {
			m.cancelPage()
		}
		m.waiting, m.loading = false, false
		return m.openTemplates()
	case key.Matches(msg, k.NextPage):
		if m.next != "" && !m.loading {
			m.prev, m.after, m.entCursor, m.entTop = append(m.prev, m.after), m.next, 0, 0
			return m.loadPage()
		}
	case key.Matches(msg, k.PrevPage):
		if len(m.prev) > 0 && !m.loading {
			m.after, m.prev = m.prev[len(m.prev)-1], m.prev[:len(m.prev)-1]
			m.entCursor, m.entTop = 0, 0
			return m.loadPage()
		}
	case key.Matches(msg, k.Filter):
		m.openFilter()
	case key.Matches(msg, k.Plan):
		m.openReason()
	case key.Matches(msg, k.Reload):
		m.status = ""
		scan := m.startScan()
		return tea.Batch(scan, m.loadPage())
	default:
		m.entCursor = m.move(msg, m.entCursor, len(m.items))
	}
	return nil
}

// onEnvelopeKey handles a key on one entry's envelope.
func (m *Model) onEnvelopeKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Back):
		m.screen = m.envFrom
	case key.Matches(msg, k.Reveal):
		m.reveal = !m.reveal
		m.envLines = nil
	case key.Matches(msg, k.Reload):
		return m.reloadEnvelope()
	case key.Matches(msg, k.Down):
		m.envTop++
	case key.Matches(msg, k.Up):
		m.envTop--
	case key.Matches(msg, k.PageDown):
		m.envTop += m.bodyHeight()
	case key.Matches(msg, k.PageUp):
		m.envTop -= m.bodyHeight()
	case key.Matches(msg, k.Top):
		m.envTop = 0
	case key.Matches(msg, k.Bottom):
		m.envTop = 1 << 30
	}
	return nil
}

// move is the cursor movement shared by both lists.
func (m *Model) move(msg tea.KeyPressMsg, cur, n int) int {
	k := m.keys
	switch {
	case key.Matches(msg, k.Up):
		cur--
	case key.Matches(msg, k.Down):
		cur++
	case key.Matches(msg, k.PageUp):
		cur -= m.listHeight()
	case key.Matches(msg, k.PageDown):
		cur += m.listHeight()
	case key.Matches(msg, k.Top):
		cur = 0
	case key.Matches(msg, k.Bottom):
		cur = n - 1
	}
	return clamp(cur, 0, max(n-1, 0))
}

func (m *Model) newInput(prompt, value, placeholder string) textinput.Model {
	in := textinput.New()
	m.deps.Styles.StyleInput(&in)
	in.Prompt = prompt
	in.Placeholder = placeholder
	in.SetValue(value)
	in.CharLimit = 1024
	in.SetWidth(max(m.width-lenCols(prompt)-2, 10))
	return in
}

func (m *Model) openFilter() {
	f := m.filter
	m.inputs = []textinput.Model{
		m.newInput("error regex: ", f.Error, "e.g. timeout|503"),
		m.newInput("event IDs:   ", strings.Join(f.EventIDs, ","), "comma-separated"),
		m.newInput("origins:     ", strings.Join(f.Origins, ","), "topics/streams, comma-separated"),
		m.newInput("owners:      ", strings.Join(f.Owners, ","), "comma-separated"),
	}
	m.focus, m.inputErr, m.mode = 0, "", inputFilter
	m.inputs[0].Focus()
}

func (m *Model) openReason() {
	if m.planning {
		return
	}
	m.inputs = []textinput.Model{m.newInput("reason: ", m.deps.Reason, "why redrive these (kept in the plan and the journal)")}
	m.focus, m.inputErr, m.mode = 0, "", inputReason
	m.inputs[0].Focus()
}

func (m *Model) updateInput(msg tea.KeyPressMsg) tea.Cmd {
	// By key code, not by name: typed text that reads "up" or "enter" is
	// text.
	switch {
	case msg.Code == tea.KeyEscape:
		m.mode, m.inputs = inputNone, nil
		return nil
	case msg.Code == tea.KeyTab && msg.Mod&tea.ModShift != 0, msg.Code == tea.KeyUp:
		m.setFocus(m.focus - 1)
		return nil
	case msg.Code == tea.KeyTab, msg.Code == tea.KeyDown:
		m.setFocus(m.focus + 1)
		return nil
	case msg.Code == tea.KeyEnter:
		if m.mode == inputFilter {
			return m.applyFilter()
		}
		return m.submitPlan()
	}
	if rs := []rune(msg.Text); len(rs) > 1 {
		// One rune at a time: bubbles matches its key bindings by name, so
		// the text "up" read in one go would be taken for the up arrow.
		var cmds []tea.Cmd
		for _, r := range rs {
			var cmd tea.Cmd
			m.inputs[m.focus], cmd = m.inputs[m.focus].Update(tea.KeyPressMsg{Code: r, Text: string(r)})
			cmds = append(cmds, cmd)
		}
		return tea.Batch(cmds...)
	}
	var cmd tea.Cmd
	m.inputs[m.focus], cmd = m.inputs[m.focus].Update(msg)
	return cmd
}

func (m *Model) setFocus(i int) {
	m.inputs[m.focus].Blur()
	m.focus = (i + len(m.inputs)) % len(m.inputs)
	m.inputs[m.focus].Focus()
}

func (m *Model) applyFilter() tea.Cmd {
	f := Filter{
		Error:    strings.TrimSpace(m.inputs[0].Value()),
		EventIDs: splitList(m.inputs[1].Value()),
		Origins:  splitList(m.inputs[2].Value()),
		Owners:   splitList(m.inputs[3].Value()),
	}
	if _, err := m.deps.Selector(f, ""); err != nil {
		m.inputErr = err.Error()
		return nil
	}
	m.filter, m.mode, m.inputs, m.status = f, inputNone, nil, ""
	scan := m.startScan()
	if m.screen == screenEntries {
		m.after, m.prev, m.entCursor, m.entTop = "", nil, 0, 0
		return tea.Batch(scan, m.loadPage())
	}
	m.catCursor, m.catTop = 0, 0
	return scan
}

func (m *Model) submitPlan() tea.Cmd {
	reason := strings.TrimSpace(m.inputs[0].Value())
	if reason == "" {
		m.inputErr = "a reason is required: it goes into the plan and the journal"
		return nil
	}
	m.deps.Reason = reason
	m.mode, m.inputs, m.planning = inputNone, nil, true
	m.status, m.statusOK = "planning…", true
	cat := ""
	if m.screen == screenEntries {
		cat = m.category
	}
	ctx, f, plan, src := m.ctx, m.filter, m.deps.Plan, m.src
	return func() tea.Msg {
		var res PlanResult
		var err error
		if herr := src.hold(ctx, func() { res, err = plan(ctx, f, cat, reason) }); herr != nil {
			err = herr
		}
		return planMsg{res: res, err: err}
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }

func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

func lenCols(s string) int { return len([]rune(s)) }
