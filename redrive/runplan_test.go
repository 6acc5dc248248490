package redrive

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A journal of an earlier version embeds its plan: it replays from the
// file alone. A journal that names its plan by digest takes the plan file,
// found at its recorded path or next to the journal, and nothing else.
func TestLoadRunPlanOldAndNewJournals(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }
	dir := t.TempDir()
	p := testPlan()
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}

	old := filepath.Join(dir, "old.journal")
	j, err := CreateJournal(old, now)
	if err != nil {
		t.Fatal(err)
	}
	j.Append(Record{Type: RecRunStart, RunID: "r0", Plan: p})
	j.Append(Record{Type: RecRemoved, Seq: 1})
	j.Close()
	start, err := ReadRunStart(old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadRunPlan(start, old, "")
	if err != nil || got.Digest != p.Digest {
		t.Fatalf("embedded plan: %v, %v", got, err)
	}
	st, _, err := ReplayFile(old, nil, got)
	if err != nil || st.Step(1) != RecRemoved {
		t.Fatalf("replay of an old journal: %v, step %q", err, st.Step(1))
	}

	// A new journal whose plan was moved next to it after the run.
	sub := filepath.Join(dir, "runs")
	os.MkdirAll(sub, 0o700)
	journal := filepath.Join(sub, "p.journal")
	j, _ = CreateJournal(journal, now)
	j.Append(Record{Type: RecRunStart, RunID: "r1", PlanDigest: p.Digest, PlanPath: filepath.Join(dir, "gone", "p.json")})
	j.Append(Record{Type: RecPublished, Seq: 1, DestID: "d1"})
	j.Close()
	start, _ = ReadRunStart(journal)
	if _, err := LoadRunPlan(start, journal, ""); !errors.Is(err, ErrRunPlan) {
		t.Fatalf("no plan file anywhere: %v, want ErrRunPlan", err)
	}
	if err := WritePlan(filepath.Join(sub, "p.json"), p); err != nil {
		t.Fatal(err)
	}
	got, err = LoadRunPlan(start, journal, "")
	if err != nil {
		t.Fatalf("plan next to the journal: %v", err)
	}
	st, _, err = ReplayFile(journal, nil, got)
	if err != nil || st.Step(1) != RecPublished || st.DestID(1) != "d1" {
		t.Fatalf("replay: %v, step %q, dest %q", err, st.Step(1), st.DestID(1))
	}
	// Another plan given to the replay is refused by the run-start.
	other := testPlan()
	other.Reason = "another"
	other.Seal()
	if _, _, err := ReplayFile(journal, nil, other); !errors.Is(err, ErrRunPlan) {
		t.Errorf("replay with another plan: %v, want ErrRunPlan", err)
	}
	if _, _, err := ReplayFile(journal, nil, nil); !errors.Is(err, ErrRunPlan) {
		t.Errorf("replay with no plan: %v, want ErrRunPlan", err)
	}
}

func TestDestIDsKeepEachEntrysLast(t *testing.T) {
	var d destIDs
	if d.get(3) != "" {
		t.Fatal("an unset destination ID is not empty")
	}
	long := string(make([]byte, 70000))
	d.set(0, 5, "1-0")
	d.set(2, 5, "")
	d.set(3, 5, long)
	d.set(0, 5, "2-0")
	if d.get(0) != "2-0" || d.get(1) != "" || d.get(2) != "" || d.get(3) != long {
		t.Errorf("got %q %q %q %d bytes", d.get(0), d.get(1), d.get(2), len(d.get(3)))
	}
	d.set(3, 5, "3-0")
	if d.get(3) != "3-0" {
		t.Errorf("a long ID replaced by a short one reads %d bytes", len(d.get(3)))
	}
}
