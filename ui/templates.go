package ui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// templatesState is the templates screen of one category (its errors
// grouped by template) and the entries of one template.
type templatesState struct {
	gen     int
	cancel  context.CancelFunc
	loading bool
	err     error
	groups  []inspect.TemplateGroup
	total   int
	cursor  int
	top     int

	// the entries of the opened template, a page at a time
	open      int
	page      int
	itemsGen  int
	items     []inspect.Item
	itemsErr  error
	itemsBusy bool
	gone      int // ids of the page no longer in the DLQ
	iCursor   int
	iTop      int
}

type templatesMsg struct {
	gen int
	d   inspect.Discovery
	err error
}

type templateItemsMsg struct {
	gen   int
	items []inspect.Item
	gone  int
	err   error
}

// openTemplates switches to the templates of m.category and mines them,
// under the filter in effect.
func (m *Model) openTemplates() tea.Cmd {
	t := &m.tmpl
	if t.cancel != nil {
		t.cancel()
	}
	t.gen++
	t.loading, t.err, t.groups, t.total, t.cursor, t.top = true, nil, nil, 0, 0, 0
	m.screen = screenTemplates
	sel, err := m.deps.Selector(m.filter, m.category)
	if err != nil {
		t.loading, t.err = false, err
		return nil
	}
	ctx, cancel := context.WithCancel(m.ctx)
	t.cancel = cancel
	w, gen := m.walker, t.gen
	w.Now = m.deps.Now()
	return func() tea.Msg {
		d, err := w.Discover(ctx, inspect.DiscoverOptions{Selector: sel, KeepIDs: true})
		return templatesMsg{gen: gen, d: d, err: err}
	}
}

// loadTemplatePage reads the entries of one page of the opened template by
// id: the template lists them, so the page holds exactly its entries.
func (m *Model) loadTemplatePage() tea.Cmd {
	t := &m.tmpl
	t.itemsGen++
	t.itemsBusy, t.itemsErr, t.gone = true, nil, 0
	g := t.groups[t.open]
	size := m.deps.PageSize
	lo := min(t.page*size, len(g.IDs))
	ids := g.IDs[lo:min(lo+size, len(g.IDs))]
	w, conflicts, gen, ctx := m.walker, m.conflicts, t.itemsGen, m.ctx
	return func() tea.Msg {
		msg := templateItemsMsg{gen: gen}
		for _, id := range ids {
			e, err := w.Source.Get(ctx, id)
			if errors.Is(err, backend.ErrNotFound) {
				msg.gone++ // moved or removed since the templates were mined
				continue
			}
			if err != nil {
				msg.err = err
				break
			}
			conflict := conflicts != nil && conflicts.IsConflict(e.EventID)
			msg.items = append(msg.items, inspect.Item{Envelope: e, Class: w.Classifier.Classify(e, conflict)})
		}
		return msg
	}
}

func (m *Model) onTemplates(msg templatesMsg) {
	t := &m.tmpl
	if msg.gen != t.gen {
		return
	}
	t.loading, t.err, t.groups, t.total = false, msg.err, msg.d.Groups, msg.d.Total
}

func (m *Model) onTemplateItems(msg templateItemsMsg) {
	t := &m.tmpl
	if msg.gen != t.itemsGen {
		return
	}
	t.itemsBusy, t.items, t.gone, t.itemsErr = false, msg.items, msg.gone, msg.err
	t.iCursor = clamp(t.iCursor, 0, max(len(t.items)-1, 0))
}

func (m *Model) onTemplatesKey(msg tea.KeyPressMsg) tea.Cmd {
	k, t := m.keys, &m.tmpl
	switch {
	case key.Matches(msg, k.Back):
		if t.cancel != nil {
			t.cancel()
		}
		m.screen = screenEntries
		return m.loadPage()
	case key.Matches(msg, k.Enter):
		if t.loading || len(t.groups) == 0 {
			return nil
		}
		t.open, t.page, t.items, t.iCursor, t.iTop = t.cursor, 0, nil, 0, 0
		m.screen = screenTemplateEntries
		return m.loadTemplatePage()
	case key.Matches(msg, k.Reload):
		return m.openTemplates()
	default:
		t.cursor = m.move(msg, t.cursor, len(t.groups))
	}
	return nil
}

func (m *Model) onTemplateEntriesKey(msg tea.KeyPressMsg) tea.Cmd {
	k, t := m.keys, &m.tmpl
	switch {
	case key.Matches(msg, k.Back):
		m.screen = screenTemplates
	case key.Matches(msg, k.Enter):
		if len(t.items) == 0 || t.itemsBusy {
			return nil
		}
		m.item, m.reveal, m.envTop, m.envErr, m.envLines, m.envRead = t.items[t.iCursor], false, 0, nil, nil, time.Time{}
		m.envFrom, m.screen = screenTemplateEntries, screenEnvelope
	case key.Matches(msg, k.NextPage):
		if (t.page+1)*m.deps.PageSize < len(t.groups[t.open].IDs) && !t.itemsBusy {
			t.page, t.iCursor, t.iTop = t.page+1, 0, 0
			return m.loadTemplatePage()
		}
	case key.Matches(msg, k.PrevPage):
		if t.page > 0 && !t.itemsBusy {
			t.page, t.iCursor, t.iTop = t.page-1, 0, 0
			return m.loadTemplatePage()
		}
	case key.Matches(msg, k.Reload):
		return m.loadTemplatePage()
	default:
		t.iCursor = m.move(msg, t.iCursor, len(t.items))
	}
	return nil
}

func (m *Model) templatesView() string {
	t := &m.tmpl
	if len(t.groups) == 0 {
		if !t.loading && t.err == nil {
			return "  no entries in this category under the filter"
		}
		return ""
	}
	cols := []report.TUIColumn{
		{Name: "count", Right: true, Keep: true}, {Name: "oldest", Right: true, Keep: true},
		{Name: "template", Min: 20},
	}
	rows := make([][]string, len(t.groups))
	for i, g := range t.groups {
		age := "-"
		if g.OldestKnown {
			age = report.FormatAge(g.OldestAge)
		}
		rows[i] = []string{report.Thousands(int64(g.Count)), age, g.Template}
	}
	t.top = scrollTop(t.top, t.cursor, m.listHeight())
	return m.deps.Styles.TUIList(cols, rows, t.cursor, t.top, m.listHeight(), m.width)
}

func (m *Model) templatesStatus() string {
	t := &m.tmpl
	switch {
	case t.err != nil:
		return "mining failed: " + t.err.Error()
	case t.loading:
		return "reading the category and mining its error templates…"
	}
	return fmt.Sprintf("%s in %d templates, biggest first · enter lists a template's entries", entries(t.total), len(t.groups))
}

func (m *Model) templateEntriesStatus() string {
	t := &m.tmpl
	switch {
	case t.itemsErr != nil:
		return "read failed: " + t.itemsErr.Error()
	case t.itemsBusy:
		return "reading a page…"
	}
	n := len(t.groups[t.open].IDs)
	first := t.page*m.deps.PageSize + 1
	text := fmt.Sprintf("template of %s · page %d · entries %d–%d", entries(n), t.page+1, first, min(first+m.deps.PageSize-1, n))
	if t.gone > 0 {
		text += fmt.Sprintf(" · %d no longer in the DLQ", t.gone)
	}
	if (t.page+1)*m.deps.PageSize < n {
		text += " · ] next page"
	}
	if t.page > 0 {
		text += " · [ previous"
	}
	return text
}

// templateTitle is the opened template, for the breadcrumbs.
func (m *Model) templateTitle() string {
	if m.tmpl.open < len(m.tmpl.groups) {
		return m.tmpl.groups[m.tmpl.open].Template
	}
	return ""
}
