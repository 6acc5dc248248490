package cmd

import (
	"testing"
)

// TestUITemplatesOnAPty: in the unknown category's screen, t lists its
// error templates biggest first; opening one lists exactly its entries,
// and one of them opens; esc walks back.
func TestUITemplatesOnAPty(t *testing.T) {
	t.Setenv("TERM", "xterm-256color")
	s, done := startUI(t, 120, 30, nil, "--source", incidentSource(t), "ui")
	s.waitFor("scan complete: 284 entries read")
	// unknown is the 6th of the 8 categories by count.
	s.press("jjjjj\r")
	s.waitFor("categories › unknown", "page 1 · entries 1–16")
	s.press("t")
	s.waitFor("categories › unknown › templates", "16 entries in 7 templates",
		"fraud check rejected order <*> (score <*>)", "refund amount exceeds captured amount")
	s.press("\r")
	s.waitFor("unknown › fraud check rejected order <*> (score <*>)", "template of 5 entries · page 1 · entries 1–5",
		"20261129T081352Z-0003", "20261129T084238Z-0031", "20261129T090743Z-0120")
	s.press("\r")
	s.waitFor("last_error", "fraud check rejected order order-99819 (score 0.97)")
	s.press("\x1b")
	s.waitFor("template of 5 entries")
	s.press("\x1b")
	s.waitFor("16 entries in 7 templates")
	s.press("j\r")
	s.waitFor("template of 3 entries", "20261129T084815Z-0045")
	s.press("\x1b\x1b")
	s.waitFor("categories › unknown", "page 1 · entries 1–16")
	s.press("q")
	if code := waitExit(t, s, done); code != 0 {
		t.Fatalf("exit %d; screen:\n%s", code, s.text())
	}
}
