package backendtest

import (
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// caseTailIsRun is the tail rule of a backend whose Tail is the watermark
// of the run holding the DLQ's lease (Suite.TailIsRun), not a position:
//
//   - with no lease held through the source, Tail is "" — a scan after it
//     reads the whole DLQ — on an empty DLQ and after a Remove alike;
//   - under run R's lease, Tail is one non-empty value that neither a
//     Remove nor a new dead letter moves, and a scan after it gives
//     exactly the entries carrying R's marker (backend.MarkerRunID, which
//     the dead letter of an event R put back carries): none that carries
//     no marker or another run's, whenever it was dead-lettered.
func caseTailIsRun(t *testing.T, c *contract) {
	src := c.open(t)
	if _, ok := src.(backend.Tailer); !ok {
		t.Fatalf("declares TailIsRun (%s) but %T is no backend.Tailer", c.s.TailIsRun, src)
	}
	leaser, ok := src.(backend.Leaser)
	if !ok {
		t.Fatalf("declares TailIsRun but %T is no backend.Leaser: a run's watermark needs the run's lease", src)
	}
	later := func(after string) []string {
		t.Helper()
		return ids(c.scan(t, src, after))
	}
	if s := c.tail(t, src); s != "" {
		t.Errorf("Tail of the empty DLQ with no lease held = %q, want \"\" (the whole DLQ)", s)
	}
	got := c.seed(t, src, 1, 3)
	c.remove(t, src, got[2])
	if s := c.tail(t, src); s != "" {
		t.Errorf("Tail with no lease held, once the newest was removed = %q, want \"\" (the whole DLQ)", s)
	}
	if l := later(""); !c.sameIDs(l, seededIDs(got[:2])) {
		t.Errorf("scan after the tail \"\" = %v, want the DLQ: %v", l, seededIDs(got[:2]))
	}

	const run = "run-tail"
	held, err := leaser.Lease(c.ctx, backend.ThisProcess(run, time.Now().Truncate(time.Second)))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	t.Cleanup(func() {
		if err := held.Release(c.ctx); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	mark := c.tail(t, src)
	if mark == "" {
		t.Fatalf("Tail under %s's lease is \"\": a scan after it would read the whole DLQ as come back", run)
	}
	if l := later(mark); len(l) != 0 {
		t.Errorf("scan after %s's watermark %q = %v, want nothing: no entry carries its marker", run, mark, l)
	}
	c.remove(t, src, got[1])
	if s := c.tail(t, src); s != mark {
		t.Errorf("Tail after a Remove = %q, want %s's watermark %q unchanged", s, run, mark)
	}
	back := c.seedMarked(t, src, 4, run)
	c.seedMarked(t, src, 5, "")
	c.seedMarked(t, src, 6, "run-other")
	if l := later(mark); !c.sameIDs(l, []string{back.id}) {
		t.Errorf("scan after %s's watermark %q = %v, want only the entry carrying its marker: %v", run, mark, l, back.id)
	}
	if s := c.tail(t, src); s != mark {
		t.Errorf("Tail after new dead letters = %q, want %s's watermark %q unchanged", s, run, mark)
	}
}

// seedMarked imports entry i carrying run's marker (none for "").
func (c *contract) seedMarked(t *testing.T, src backend.Source, i int, run string) seeded {
	t.Helper()
	e := c.entry(i)
	if run != "" {
		e.Properties[backend.MarkerRunID] = run
	}
	id, err := importer(t, src).Import(c.ctx, e)
	if err != nil || id == "" {
		t.Fatalf("import %s: %q, %v", e.ID, id, err)
	}
	return seeded{e: e, id: id}
}

// remove removes one seeded entry.
func (c *contract) remove(t *testing.T, src backend.Source, s seeded) {
	t.Helper()
	rm, err := mover(t, src).Remove(c.ctx, []backend.MoveItem{s.item(1, "")})
	if err != nil || len(rm) != 1 || rm[0].Err != nil || !rm[0].Removed {
		t.Fatalf("Remove %s: %+v, %v", s.id, rm, err)
	}
}
