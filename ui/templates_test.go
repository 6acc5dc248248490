package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
)

// TestTemplatesScreen: t on a category's screen lists its templates,
// enter opens one and lists the entries read for it, and esc walks back
// the way it came, the envelope included.
func TestTemplatesScreen(t *testing.T) {
	m := testModel(t)
	scanned(m, 20, true, catRow{Name: "unknown", Disposition: "investigate", Count: 20, ExampleError: "fraud"})
	keys(m, enter)
	if m.screen != screenEntries {
		t.Fatal("enter did not open the category")
	}
	keys(m, runes("t"))
	if m.screen != screenTemplates || !m.tmpl.loading {
		t.Fatalf("t: screen %v loading %v", m.screen, m.tmpl.loading)
	}
	if !strings.Contains(m.render(), "mining its error templates") {
		t.Errorf("no progress while mining:\n%s", m.render())
	}
	groups := []inspect.TemplateGroup{
		{Template: "fraud check rejected order <*> (score <*>)", Count: 15, OldestAge: time.Hour, OldestKnown: true, IDs: ids("f", 15)},
		{Template: "refund amount exceeds captured amount", Count: 5, IDs: ids("r", 5)},
	}
	m.Update(templatesMsg{gen: m.tmpl.gen - 1, d: inspect.Discovery{Total: 1}}) // a stale answer
	if m.tmpl.groups != nil {
		t.Fatal("a stale mining answer was shown")
	}
	m.Update(templatesMsg{gen: m.tmpl.gen, d: inspect.Discovery{Total: 20, Groups: groups}})
	v := m.render()
	for _, want := range []string{"unknown › templates", "20 entries in 2 templates", "fraud check rejected order <*> (score <*>)", "15", "refund amount exceeds captured amount"} {
		if !strings.Contains(v, want) {
			t.Errorf("templates screen lacks %q:\n%s", want, v)
		}
	}
	keys(m, runes("j"), enter)
	if m.screen != screenTemplateEntries || m.tmpl.open != 1 || !m.tmpl.itemsBusy {
		t.Fatalf("enter: screen %v open %d busy %v", m.screen, m.tmpl.open, m.tmpl.itemsBusy)
	}
	var items []inspect.Item
	for _, id := range groups[1].IDs[:4] {
		items = append(items, inspect.Item{Envelope: envelope.Envelope{ID: id, EventID: "evt-" + id, LastError: "refund amount exceeds captured amount"},
			Class: envelope.Classification{Category: "unknown", Disposition: "investigate"}})
	}
	m.Update(templateItemsMsg{gen: m.tmpl.itemsGen, items: items, gone: 1})
	v = m.render()
	for _, want := range []string{"unknown › refund amount", "template of 5 entries", "1 no longer in the DLQ", "r0", "r3"} {
		if !strings.Contains(v, want) {
			t.Errorf("template entries lack %q:\n%s", want, v)
		}
	}
	keys(m, runes("j"), enter)
	if m.screen != screenEnvelope || m.item.Envelope.ID != "r1" {
		t.Fatalf("enter on the second entry: screen %v item %q", m.screen, m.item.Envelope.ID)
	}
	keys(m, esc)
	if m.screen != screenTemplateEntries {
		t.Fatalf("esc from the envelope went to screen %v", m.screen)
	}
	keys(m, esc)
	if m.screen != screenTemplates {
		t.Fatalf("esc went to screen %v", m.screen)
	}
	keys(m, esc)
	if m.screen != screenEntries {
		t.Fatalf("esc from the templates went to screen %v", m.screen)
	}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + string(rune('0'+i%10))
		if i >= 10 {
			out[i] += "x"
		}
	}
	return out
}
