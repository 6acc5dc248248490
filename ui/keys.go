package ui

import "charm.land/bubbles/v2/key"

// keyMap is every key of the browser; `?` shows them all.
type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Enter, Back, Quit, Help, Filter, Reload key.Binding
	Plan, Reveal, NextPage, PrevPage        key.Binding
	Templates                               key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		Up:        key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:      key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:    key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "scroll up")),
		PageDown:  key.NewBinding(key.WithKeys("pgdown", "f", "space"), key.WithHelp("pgdn", "scroll down")),
		Top:       key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
		Bottom:    key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom")),
		Enter:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		Back:      key.NewBinding(key.WithKeys("esc", "backspace", "left", "h"), key.WithHelp("esc", "back")),
		Quit:      key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "keys")),
		Filter:    key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Reload:    key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
		Plan:      key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "plan a redrive")),
		Reveal:    key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "reveal/hide personal data")),
		NextPage:  key.NewBinding(key.WithKeys("]", "n"), key.WithHelp("]", "next page")),
		PrevPage:  key.NewBinding(key.WithKeys("[", "N"), key.WithHelp("[", "previous page")),
		Templates: key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "error templates")),
	}
}

// helpKeys adapts the key map to bubbles/help for one screen, so that `?`
// lists only the keys that do something where the user is.
type helpKeys struct {
	k      keyMap
	screen screen
}

func (h helpKeys) ShortHelp() []key.Binding {
	b := []key.Binding{h.k.Enter, h.k.Back, h.k.Templates, h.k.Filter, h.k.Plan, h.k.Reload, h.k.Help, h.k.Quit}
	switch h.screen {
	case screenCategories:
		b = []key.Binding{h.k.Enter, h.k.Templates, h.k.Filter, h.k.Plan, h.k.Reload, h.k.Help, h.k.Quit}
	case screenTemplates, screenTemplateEntries:
		b = []key.Binding{h.k.Enter, h.k.Back, h.k.Reload, h.k.Help, h.k.Quit}
	case screenEnvelope:
		b = []key.Binding{h.k.Back, h.k.Reveal, h.k.Reload, h.k.Help, h.k.Quit}
	}
	return b
}

func (h helpKeys) FullHelp() [][]key.Binding {
	move := []key.Binding{h.k.Up, h.k.Down, h.k.PageUp, h.k.PageDown, h.k.Top, h.k.Bottom}
	switch h.screen {
	case screenCategories:
		return [][]key.Binding{move, {h.k.Enter, h.k.Templates, h.k.Filter, h.k.Plan, h.k.Reload}, {h.k.Help, h.k.Quit}}
	case screenEntries:
		return [][]key.Binding{move, {h.k.Enter, h.k.Back, h.k.NextPage, h.k.PrevPage}, {h.k.Templates, h.k.Filter, h.k.Plan, h.k.Reload}, {h.k.Help, h.k.Quit}}
	case screenTemplates:
		return [][]key.Binding{move, {h.k.Enter, h.k.Back, h.k.Reload}, {h.k.Help, h.k.Quit}}
	case screenTemplateEntries:
		return [][]key.Binding{move, {h.k.Enter, h.k.Back, h.k.NextPage, h.k.PrevPage, h.k.Reload}, {h.k.Help, h.k.Quit}}
	}
	return [][]key.Binding{{h.k.Up, h.k.Down, h.k.PageUp, h.k.PageDown}, {h.k.Back, h.k.Reveal, h.k.Reload}, {h.k.Help, h.k.Quit}}
}
