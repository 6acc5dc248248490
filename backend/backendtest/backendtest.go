// Package backendtest is the contract every backend keeps, item by item:
// one suite of Go tests that each backend's package runs against its real
// server (TestContract), before the minutes-long command-line conformance
// suite. It checks the rules that backend.Source, Importer, Mover, Tailer
// and Leaser document — Get and Len, an entry that is gone, an entry that
// changed since the plan, atomic and two-step moves as the backend
// declares them, Tail after Remove, one lease holder at a time, import and
// its duplicates, scan order, `after` and ErrStop — and that the
// capabilities a backend declares are the interfaces its sources
// implement. Where a backend cannot do something it says so (in its
// Capabilities, or a nil hook below), and the suite checks the refusal
// instead of skipping the case.
//
// It runs on the directory queue first: seconds, no server. It imports
// package backend and envelope only, so a backend's test binary links
// that backend alone.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Suite is the contract suite for one backend. A backend's package runs it
// from TestContract:
//
//	func TestContract(t *testing.T) {
//		backendtest.Suite{Registration: NAME.Registration(), Fresh: …}.Run(t)
//	}
type Suite struct {
	// Registration is the backend under test. Its Capabilities say what
	// the suite expects the sources to implement; its Parse and Open open
	// them unless Open is set.
	Registration backend.Registration
	// Fresh makes a new, empty DLQ that exists, and a destination that
	// its entries may be moved to.
	Fresh func(t *testing.T) Fixture
	// Open, when set, opens raw instead of the registration: a backend's
	// tests shorten with it what the suite would otherwise wait for (a
	// lease's renewal interval). nil: Registration.Parse, then
	// Registration.Open with Options.
	Open func(ctx context.Context, raw string) (backend.Source, error)
	// Options are what Registration.Open gets besides the URL (Getenv
	// for a password); Fields default to envelope.DefaultFieldNames.
	Options backend.OpenOptions
	// Unordered: the backend keeps no order among entries written within
	// one millisecond (SQS), so scans are compared as sets and `after` is
	// checked against the order the scan itself gives.
	Unordered bool
	// UncheckedComputed: a move does not check the fingerprint of an
	// entry that carries none, whose planned fingerprint dlqctl computed
	// from the payload, because the broker's atomic step cannot compute
	// it (Redis's Lua has no SHA-256) and its entries cannot change once
	// written (a stream entry is immutable). The suite checks that such
	// an entry moves whatever the plan says, and that a carried one is
	// still checked.
	UncheckedComputed bool
	// Lease says how the backend's DLQ lease behaves when its holder
	// dies; ignored when Capabilities.Lease is false.
	Lease LeaseBehaviour
	// TailIsRun, when set, says why the backend's Tail is no position
	// but the watermark of the run holding the lease (a RabbitMQ classic
	// or quorum queue, where positions shift as messages leave: a scan
	// after it gives the dead letters carrying that run's marker). The
	// tail case then checks that rule (caseTailIsRun) instead of the
	// positional one.
	TailIsRun string
}

// LeaseBehaviour is how a backend's lease outlives its holder, which
// decides how a crashed run's resume takes it over and how a lease is
// lost.
type LeaseBehaviour struct {
	// Crash, when set, does to a held lease what its holder's death does:
	// the primitive is tied to the holder's connection or file (an flock,
	// an exclusive consumer or queue), so nothing takes it while the
	// holder lives — not even its own run's resume, which the suite
	// checks is refused — and it cannot be lost while held, which the
	// suite checks too.
	//
	// nil: the lease outlives its holder until it expires (a key, a
	// record, a tag naming the holder's PID), and the run's resume takes
	// it over when the holder's process is gone. The suite's holder then
	// runs under a PID that has exited; once its lease is taken over it
	// must see Lost within LostWithin.
	Crash func(t *testing.T, l backend.Lease)
	// LostWithin is how long a holder whose lease was taken over may take
	// to see it (Lost closed): its renewal interval and a margin. Used
	// when Crash is nil.
	LostWithin time.Duration
}

// Fixture is one new, empty DLQ.
type Fixture struct {
	// Source is its source URL.
	Source string
	// Dest is a destination its entries may be moved to (a topic, a
	// stream, a queue, a folder): the suite's envelopes name it as their
	// origin.
	Dest string
}

// Run runs every case of the contract on the backend, each on a DLQ of
// its own.
func (s Suite) Run(t *testing.T) {
	t.Helper()
	caps := s.Registration.Capabilities
	if s.Fresh == nil {
		t.Fatal("backendtest: Suite.Fresh is nil")
	}
	if !caps.Import {
		// Every case seeds its DLQ through Import; a backend without it
		// must still be read, which this suite cannot do yet.
		t.Fatalf("backend %s declares no import: the contract suite seeds every DLQ through Import", s.Registration.Name)
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, *contract)
	}{
		{"capabilities", caseCapabilities},
		{"empty", caseEmpty},
		{"import-has", caseImportHas},
		{"get-len", caseGetLen},
		{"scan-order-after-stop", caseScan},
		{"lean-and-fingerprint-scans", caseCheapScans},
		{"changed", caseChanged},
		{"move", caseMove},
		{"not-found", caseNotFound},
		{"tail-after-remove", caseTail},
		{"lease", caseLease},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			fx := s.Fresh(t)
			c.run(t, &contract{s: s, fx: fx, ctx: ctx})
		})
	}
}

// contract is one case's DLQ and the suite it runs in.
type contract struct {
	s   Suite
	fx  Fixture
	ctx context.Context
}

func (c *contract) caps() backend.Capabilities { return c.s.Registration.Capabilities }

// open opens the case's DLQ (a new client each time) and closes it when
// the case ends.
func (c *contract) open(t *testing.T) backend.Source {
	t.Helper()
	var src backend.Source
	var err error
	if c.s.Open != nil {
		src, err = c.s.Open(c.ctx, c.fx.Source)
	} else {
		src, err = c.openRegistered()
	}
	if err != nil {
		t.Fatalf("open %s: %v", c.fx.Source, err)
	}
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("close %s: %v", src, err)
		}
	})
	return src
}

// openRegistered opens the DLQ as the command layer does: the URL parsed
// once, its typed form handed to Open.
func (c *contract) openRegistered() (backend.Source, error) {
	reg := c.s.Registration
	p, err := reg.Parse(c.fx.Source)
	if err != nil {
		return nil, err
	}
	opts := c.s.Options
	if opts.Fields == nil {
		opts.Fields = envelope.DefaultFieldNames()
	}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.Secret == nil {
		opts.Secret = func(string) string { return "" }
	}
	return reg.Open(c.ctx, p, opts)
}

// entry is the suite's ith envelope: event C00i, a JSON payload of its
// own, bound for the fixture's destination, dead-lettered i seconds after
// a fixed base. Every third one carries no fingerprint, so that a
// computed one is checked too.
func (c *contract) entry(i int) envelope.Envelope {
	payload := []byte(fmt.Sprintf(`{"order":%d}`, i))
	e := envelope.Envelope{
		ID: fmt.Sprintf("%d-0", 1700000000000+i), EventID: fmt.Sprintf("C%03d", i),
		Payload: payload, PayloadEncoding: envelope.EncodingJSON, ContentType: "application/json",
		Key: fmt.Sprintf("k%d", i%3), Origin: envelope.Origin{Topic: c.fx.Dest},
		LastError: "timeout calling payments", Attempts: 3,
		DeadLetteredAt: time.Date(2026, 11, 29, 10, 0, i, 0, time.UTC),
		Properties:     map[string]string{"tenant": "acme"},
	}
	if i%3 != 0 {
		e.Fingerprint = envelope.ComputeFingerprint(payload)
	}
	return e
}

// seeded is one imported envelope and the locator Import gave it.
type seeded struct {
	e  envelope.Envelope
	id string
}

func (s seeded) item(seq int64, dest string) backend.MoveItem {
	return backend.MoveItem{Seq: seq, ID: s.id, EventID: s.e.EventID, Fingerprint: envelope.ComputeFingerprint(s.e.Payload), Dest: dest}
}

// seed imports entries first … first+n-1 through src.
func (c *contract) seed(t *testing.T, src backend.Source, first, n int) []seeded {
	t.Helper()
	imp := importer(t, src)
	out := make([]seeded, 0, n)
	for i := first; i < first+n; i++ {
		e := c.entry(i)
		id, err := imp.Import(c.ctx, e)
		if err != nil {
			t.Fatalf("import %s: %v", e.ID, err)
		}
		if id == "" {
			t.Fatalf("import %s: no locator", e.ID)
		}
		out = append(out, seeded{e: e, id: id})
	}
	return out
}

func importer(t *testing.T, src backend.Source) backend.Importer {
	t.Helper()
	imp, ok := src.(backend.Importer)
	if !ok {
		t.Fatalf("%T declares import but is no backend.Importer", src)
	}
	return imp
}

func mover(t *testing.T, src backend.Source) backend.Mover {
	t.Helper()
	m, ok := src.(backend.Mover)
	if !ok {
		t.Fatalf("%T declares moves but is no backend.Mover", src)
	}
	return m
}

// scan is every entry src.Scan visits after `after`.
func (c *contract) scan(t *testing.T, src backend.Source, after string) []envelope.Envelope {
	t.Helper()
	var out []envelope.Envelope
	if err := src.Scan(c.ctx, after, func(e envelope.Envelope) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("scan after %q: %v", after, err)
	}
	return out
}

func ids(es []envelope.Envelope) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func seededIDs(ss []seeded) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.id
	}
	return out
}

// sameIDs compares locators in order, or as sets for an unordered backend.
func (c *contract) sameIDs(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	if !c.s.Unordered {
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}
	left := map[string]int{}
	for _, id := range want {
		left[id]++
	}
	for _, id := range got {
		if left[id] == 0 {
			return false
		}
		left[id]--
	}
	return true
}

// checkEntry: what was read back is what was imported, as far as every
// backend keeps it: event ID, fingerprint (carried, or computed from the
// payload), payload, origin, key, attempts, error, dead-letter time and
// the properties it was given; not malformed.
func checkEntry(t *testing.T, how string, got envelope.Envelope, want seeded) {
	t.Helper()
	fp := envelope.ComputeFingerprint(want.e.Payload)
	switch {
	case got.ID != want.id:
		t.Errorf("%s: id %q, want %q", how, got.ID, want.id)
	case got.Malformed != "":
		t.Errorf("%s %s: malformed: %s", how, got.ID, got.Malformed)
	case got.EventID != want.e.EventID:
		t.Errorf("%s %s: event ID %q, want %q", how, got.ID, got.EventID, want.e.EventID)
	case !strings.EqualFold(got.Fingerprint, fp):
		t.Errorf("%s %s: fingerprint %q, want %q", how, got.ID, got.Fingerprint, fp)
	case got.FingerprintComputed != (want.e.Fingerprint == ""):
		t.Errorf("%s %s: fingerprint computed %v, want %v (carried %q)", how, got.ID, got.FingerprintComputed, want.e.Fingerprint == "", want.e.Fingerprint)
	case string(got.Payload) != string(want.e.Payload):
		t.Errorf("%s %s: payload %q, want %q", how, got.ID, got.Payload, want.e.Payload)
	case got.Origin.Topic != want.e.Origin.Topic:
		t.Errorf("%s %s: origin %q, want %q", how, got.ID, got.Origin.Topic, want.e.Origin.Topic)
	case got.Key != want.e.Key:
		t.Errorf("%s %s: key %q, want %q", how, got.ID, got.Key, want.e.Key)
	case got.Attempts != want.e.Attempts || got.LastError != want.e.LastError:
		t.Errorf("%s %s: %d attempts, error %q; want %d, %q", how, got.ID, got.Attempts, got.LastError, want.e.Attempts, want.e.LastError)
	case !got.DeadLetteredAt.Equal(want.e.DeadLetteredAt):
		t.Errorf("%s %s: dead-lettered at %s, want %s", how, got.ID, got.DeadLetteredAt, want.e.DeadLetteredAt)
	case got.Properties["tenant"] != want.e.Properties["tenant"]:
		t.Errorf("%s %s: properties %v, want tenant %q among them", how, got.ID, got.Properties, want.e.Properties["tenant"])
	}
}

// length is src.Len, failing the test on an error.
// tail is src's Tail, checked against its LenTail where it has one.
func (c *contract) tail(t *testing.T, src backend.Source) string {
	t.Helper()
	s, err := src.(backend.Tailer).Tail(c.ctx)
	if err != nil {
		t.Fatalf("Tail: %v", err)
	}
	if lt, ok := src.(backend.LenTailer); ok {
		n, s2, err := lt.LenTail(c.ctx)
		if err != nil || s2 != s || n != c.length(t, src) {
			t.Errorf("LenTail = %d, %q, %v; Len and Tail say %d, %q", n, s2, err, c.length(t, src), s)
		}
	}
	return s
}

func (c *contract) length(t *testing.T, src backend.Source) int64 {
	t.Helper()
	n, err := src.Len(c.ctx)
	if err != nil {
		t.Fatalf("Len: %v", err)
	}
	return n
}

// wantGone: Get of id answers ErrNotFound.
func (c *contract) wantGone(t *testing.T, src backend.Source, id, why string) {
	t.Helper()
	if e, err := src.Get(c.ctx, id); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get(%s) %s = %+v, %v; want an error wrapping ErrNotFound", id, why, e, err)
	}
}

// caseCapabilities: what the registration declares is what its sources
// implement, no more and no less, so that docs/backends.md, the
// conformance suite and the commands agree with the code.
func caseCapabilities(t *testing.T, c *contract) {
	reg := c.s.Registration
	caps := c.caps()
	src := c.open(t)
	if src.String() == "" {
		t.Error("String() is empty: a source must name its DLQ")
	}
	if p, err := reg.Parse(c.fx.Source); err != nil || p.Display == "" {
		t.Errorf("Parse(%s) = %+v, %v: want a display form", c.fx.Source, p, err)
	}
	has := func(what string, declared, implemented bool) {
		t.Helper()
		if declared != implemented {
			t.Errorf("%s: declared %v, but %T implements it: %v", what, declared, src, implemented)
		}
	}
	_, imp := src.(backend.Importer)
	has("import (backend.Importer)", caps.Import, imp)
	m, mov := src.(backend.Mover)
	has("move (backend.Mover)", caps.Move != "", mov)
	switch caps.Move {
	case "", "atomic", "two-step":
	default:
		t.Errorf("move %q: want atomic, two-step or empty", caps.Move)
	}
	if mov && m.Atomic() != (caps.Move == "atomic") {
		t.Errorf("move declared %q, but Atomic() = %v", caps.Move, m.Atomic())
	}
	if caps.Resolve && !mov {
		t.Errorf("resolve declared, but %T cannot Remove (no backend.Mover)", src)
	}
	_, tail := src.(backend.Tailer)
	has("re-dead-letter check (backend.Tailer)", caps.Tail, tail)
	if _, lt := src.(backend.LenTailer); lt && !tail {
		t.Errorf("%T is a LenTailer but no Tailer", src)
	}
	_, extras := src.(backend.Extras)
	has("stats extras (backend.Extras)", caps.Extras, extras)
	_, leaser := src.(backend.Leaser)
	has("DLQ lease (backend.Leaser)", caps.Lease, leaser)
	_, groups := src.(backend.GroupInspector)
	_, quarantine := src.(backend.Quarantiner)
	has("pending (backend.GroupInspector)", caps.Pending, groups)
	has("quarantine (backend.Quarantiner)", caps.Pending, quarantine)
	if _, ok := src.(backend.LeaseChecker); ok && !leaser {
		t.Errorf("%T is a LeaseChecker but no Leaser", src)
	}
}

// caseEmpty: a new DLQ reads as empty everywhere.
func caseEmpty(t *testing.T, c *contract) {
	src := c.open(t)
	if n := c.length(t, src); n != 0 {
		t.Errorf("Len of a new DLQ = %d", n)
	}
	if got := c.scan(t, src, ""); len(got) != 0 {
		t.Errorf("scan of a new DLQ: %v", ids(got))
	}
	if has, err := importer(t, src).Has(c.ctx, c.entry(1).ID); err != nil || has {
		t.Errorf("Has on a new DLQ = %v, %v", has, err)
	}
}

// caseImportHas: an import is seen by Has (in this client and in a new
// one), and the same id imported again is refused with ErrExists and
// writes nothing.
func caseImportHas(t *testing.T, c *contract) {
	src := c.open(t)
	imp := importer(t, src)
	e := c.entry(1)
	if has, err := imp.Has(c.ctx, e.ID); err != nil || has {
		t.Fatalf("Has before the import = %v, %v", has, err)
	}
	got := c.seed(t, src, 1, 2)
	for _, s := range got {
		if has, err := imp.Has(c.ctx, s.e.ID); err != nil || !has {
			t.Errorf("Has(%s) after its import = %v, %v", s.e.ID, has, err)
		}
	}
	if _, err := imp.Import(c.ctx, e); !errors.Is(err, backend.ErrExists) {
		t.Errorf("the same id imported again: %v, want an error wrapping ErrExists", err)
	}
	other := c.open(t)
	if has, err := importer(t, other).Has(c.ctx, e.ID); err != nil || !has {
		t.Errorf("Has(%s) in a new client = %v, %v", e.ID, has, err)
	}
	if _, err := importer(t, other).Import(c.ctx, e); !errors.Is(err, backend.ErrExists) {
		t.Errorf("the same id imported again by a new client: %v, want an error wrapping ErrExists", err)
	}
	if n := c.length(t, other); n != 2 {
		t.Errorf("Len after two imports and two refused = %d, want 2", n)
	}
}

// caseGetLen: Len counts the entries; Get gives each one as Scan does.
func caseGetLen(t *testing.T, c *contract) {
	src := c.open(t)
	got := c.seed(t, src, 1, 3)
	if n := c.length(t, src); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}
	reader := c.open(t)
	for _, s := range got {
		e, err := reader.Get(c.ctx, s.id)
		if err != nil {
			t.Errorf("Get(%s): %v", s.id, err)
			continue
		}
		checkEntry(t, "Get", e, s)
	}
}

// caseScan: a scan visits every entry once, oldest first; `after` starts
// past a locator; fn's ErrStop ends it without an error, and any other
// error of fn ends it with that error.
func caseScan(t *testing.T, c *contract) {
	src := c.open(t)
	got := c.seed(t, src, 1, 5)
	all := c.scan(t, src, "")
	if !c.sameIDs(ids(all), seededIDs(got)) {
		t.Fatalf("scan = %v, want %v", ids(all), seededIDs(got))
	}
	byID := map[string]seeded{}
	for _, s := range got {
		byID[s.id] = s
	}
	for _, e := range all {
		checkEntry(t, "Scan", e, byID[e.ID])
	}
	// After the second entry the scan gives: the rest, in the scan's order.
	order := ids(all)
	if after := c.scan(t, src, order[1]); !c.sameIDs(ids(after), order[2:]) || (c.s.Unordered && ids(after)[0] != order[2]) {
		t.Errorf("scan after %s = %v, want %v", order[1], ids(after), order[2:])
	}
	if after := c.scan(t, src, order[len(order)-1]); len(after) != 0 {
		t.Errorf("scan after the newest entry = %v, want nothing", ids(after))
	}
	var seen []string
	err := src.Scan(c.ctx, "", func(e envelope.Envelope) error {
		seen = append(seen, e.ID)
		if len(seen) == 2 {
			return backend.ErrStop
		}
		return nil
	})
	if err != nil || len(seen) != 2 {
		t.Errorf("a scan stopped with ErrStop after 2 entries: saw %v, returned %v; want 2 and nil", seen, err)
	}
	boom := errors.New("the caller's own error")
	seen = nil
	err = src.Scan(c.ctx, "", func(e envelope.Envelope) error {
		seen = append(seen, e.ID)
		return boom
	})
	if !errors.Is(err, boom) || len(seen) != 1 {
		t.Errorf("a scan whose fn failed on the first entry: saw %v, returned %v; want 1 and that error", seen, err)
	}
}

// caseCheapScans: the lean scan and the fingerprint scan, where the
// backend has them, give what the full scan gives.
func caseCheapScans(t *testing.T, c *contract) {
	src := c.open(t)
	c.seed(t, src, 1, 4)
	full := c.scan(t, src, "")
	if ls, ok := src.(backend.LeanScanner); ok {
		var lean []envelope.Envelope
		if err := ls.ScanLean(c.ctx, "", func(e envelope.Envelope) error {
			lean = append(lean, e)
			return nil
		}); err != nil {
			t.Fatalf("ScanLean: %v", err)
		}
		if !c.sameIDs(ids(lean), ids(full)) {
			t.Fatalf("ScanLean = %v, Scan = %v", ids(lean), ids(full))
		}
		byID := map[string]envelope.Envelope{}
		for _, e := range full {
			byID[e.ID] = e
		}
		for _, e := range lean {
			// Everything but what a lean scan may leave out.
			f := byID[e.ID]
			e.Properties, e.PropertyEncodings, e.PayloadEncoding, e.Raw = nil, nil, "", nil
			f.Properties, f.PropertyEncodings, f.PayloadEncoding, f.Raw = nil, nil, "", nil
			if !reflect.DeepEqual(e, f) {
				t.Errorf("ScanLean %s = %+v, Scan gives %+v", e.ID, e, f)
			}
		}
	}
	if fs, ok := src.(backend.FingerprintScanner); ok {
		got := map[string]string{}
		if err := fs.ScanFingerprints(c.ctx, func(id, fp string) error {
			got[id] = fp
			return nil
		}); err != nil {
			t.Fatalf("ScanFingerprints: %v", err)
		}
		if len(got) != len(full) {
			t.Errorf("ScanFingerprints gave %d entries, Scan %d", len(got), len(full))
		}
		for _, e := range full {
			if !strings.EqualFold(got[e.ID], e.Fingerprint) {
				t.Errorf("ScanFingerprints %s = %q, Scan gives %q", e.ID, got[e.ID], e.Fingerprint)
			}
		}
	}
}

// markers are the suite's run markers.
var markers = backend.Markers{RunID: "contract-run", ProducerName: "dlqctl-contract-run"}

// caseChanged: an entry whose fingerprint is not the planned one is
// refused with ErrChanged, per item, and stays where it is; the other
// items of the call move. A backend that declares UncheckedComputed moves
// an entry that carries no fingerprint whatever the plan says.
func caseChanged(t *testing.T, c *contract) {
	if c.caps().Move == "" {
		return // no moves: caseCapabilities checked that there is no Mover
	}
	src := c.open(t)
	got := c.seed(t, src, 1, 3) // carried, carried, computed fingerprints
	m := mover(t, src)
	items := []backend.MoveItem{got[0].item(1, c.fx.Dest), got[1].item(2, c.fx.Dest), got[2].item(3, c.fx.Dest)}
	items[0].Fingerprint = envelope.ComputeFingerprint([]byte(`{"order":"another"}`))
	items[2].Fingerprint = envelope.ComputeFingerprint([]byte(`{"order":"changed"}`))
	res, err := m.Publish(c.ctx, items, markers)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("Publish gave %d results for %d items", len(res), len(items))
	}
	refused := []int{0, 2}
	moved := 1
	if c.s.UncheckedComputed {
		refused = refused[:1]
		moved = 2
		if res[2].Err != nil {
			t.Errorf("item %s without a carried fingerprint, declared unchecked: %v, want it moved", items[2].ID, res[2].Err)
		}
	}
	for _, i := range refused {
		if !errors.Is(res[i].Err, backend.ErrChanged) || res[i].Removed {
			t.Errorf("item %s with another fingerprint: %+v, want ErrChanged and nothing removed", items[i].ID, res[i])
		}
	}
	if !m.Atomic() {
		// The second step, as a run takes it, for what was published.
		var done []backend.MoveItem
		for i, r := range res {
			if r.Err == nil {
				done = append(done, items[i])
			}
		}
		if rm, err := m.Remove(c.ctx, done); err != nil {
			t.Fatalf("Remove: %v", err)
		} else {
			for i, r := range rm {
				if r.Err != nil || !r.Removed {
					t.Errorf("Remove %s after its publish = %+v", done[i].ID, r)
				}
			}
		}
	}
	for _, i := range refused {
		if e, err := src.Get(c.ctx, items[i].ID); err != nil {
			t.Errorf("the changed entry %s left the DLQ: %v", items[i].ID, err)
		} else {
			checkEntry(t, "Get after a refused move", e, got[i])
		}
	}
	if res[1].Err != nil {
		t.Errorf("item %s in the same call: %v", items[1].ID, res[1].Err)
	}
	if n, want := c.length(t, src), int64(3-moved); n != want {
		t.Errorf("Len after %d moves and %d refusals = %d, want %d", moved, len(refused), n, want)
	}
}

// caseMove: an atomic backend's Publish removes the entry in the same
// step; a two-step backend's leaves it for Remove. Either way the entry
// then is gone, a second Publish or Remove of it answers ErrNotFound, and
// the destination holds it where the backend can say so.
func caseMove(t *testing.T, c *contract) {
	if c.caps().Move == "" {
		return
	}
	src := c.open(t)
	got := c.seed(t, src, 1, 3)
	m := mover(t, src)
	items := []backend.MoveItem{got[0].item(1, c.fx.Dest), got[1].item(2, c.fx.Dest)}
	since := time.Now().Add(-time.Second)
	res, err := m.Publish(c.ctx, items, markers)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	atomic := c.caps().Move == "atomic"
	for i, r := range res {
		if r.Err != nil || r.DestID == "" || r.Removed != atomic {
			t.Errorf("Publish %s = %+v: want no error, a destination ID, removed %v (move %q)", items[i].ID, r, atomic, c.caps().Move)
		}
	}
	if !atomic {
		// What a reader sees between the steps is the backend's own
		// (RabbitMQ holds the published messages unacknowledged, out of
		// every reader's sight): the contract is what Remove then does.
		rm, err := m.Remove(c.ctx, items)
		if err != nil {
			t.Fatalf("Remove: %v", err)
		}
		for i, r := range rm {
			if r.Err != nil || !r.Removed {
				t.Errorf("Remove %s after its publish = %+v, want removed", items[i].ID, r)
			}
		}
	}
	if n := c.length(t, src); n != 1 {
		t.Errorf("Len after two moves = %d, want 1", n)
	}
	for _, it := range items {
		c.wantGone(t, src, it.ID, "after its move")
	}
	if left := c.scan(t, src, ""); !c.sameIDs(ids(left), []string{got[2].id}) {
		t.Errorf("scan after two moves = %v, want %v", ids(left), got[2].id)
	}
	if pc, ok := src.(backend.PublishedChecker); ok {
		q := make([]backend.PublishedQuery, len(items))
		for i, it := range items {
			q[i] = backend.PublishedQuery{Item: it, DestID: res[i].DestID, Since: since}
		}
		pres, err := pc.CheckPublished(c.ctx, q, markers)
		if err != nil || len(pres) != len(items) {
			t.Fatalf("CheckPublished = %v, %v", pres, err)
		}
		for i, p := range pres {
			if p != backend.PresenceFound {
				t.Errorf("CheckPublished %s = %v, want found", items[i].ID, p)
			}
		}
	}
	again, err := m.Publish(c.ctx, items[:1], markers)
	if err != nil || !errors.Is(again[0].Err, backend.ErrNotFound) || again[0].Removed {
		t.Errorf("a moved entry published again: %+v, %v; want ErrNotFound, nothing published", again, err)
	}
	rm, err := m.Remove(c.ctx, items[:1])
	if err != nil || !errors.Is(rm[0].Err, backend.ErrNotFound) || rm[0].Removed {
		t.Errorf("a moved entry removed again: %+v, %v; want ErrNotFound", rm, err)
	}
	if res, err := m.Remove(c.ctx, nil); err != nil || len(res) != 0 {
		t.Errorf("Remove(nil) = %v, %v", res, err)
	}
}

// caseNotFound: an entry that left the DLQ (removed, as resolve does) is
// not found by Get, not moved by Publish, not removed twice, and no
// longer counted.
func caseNotFound(t *testing.T, c *contract) {
	if !c.caps().Resolve {
		return
	}
	src := c.open(t)
	got := c.seed(t, src, 1, 2)
	m := mover(t, src)
	gone := got[0].item(1, c.fx.Dest)
	rm, err := m.Remove(c.ctx, []backend.MoveItem{gone})
	if err != nil || len(rm) != 1 || rm[0].Err != nil || !rm[0].Removed {
		t.Fatalf("Remove = %+v, %v", rm, err)
	}
	reader := c.open(t)
	c.wantGone(t, reader, gone.ID, "after Remove")
	if n := c.length(t, reader); n != 1 {
		t.Errorf("Len after a Remove = %d, want 1", n)
	}
	if c.caps().Move != "" {
		res, err := mover(t, reader).Publish(c.ctx, []backend.MoveItem{gone}, markers)
		if err != nil || !errors.Is(res[0].Err, backend.ErrNotFound) || res[0].Removed {
			t.Errorf("Publish of a removed entry = %+v, %v; want ErrNotFound", res, err)
		}
	}
	rm, err = mover(t, reader).Remove(c.ctx, []backend.MoveItem{gone, got[1].item(2, c.fx.Dest)})
	if err != nil || !errors.Is(rm[0].Err, backend.ErrNotFound) || rm[0].Removed || rm[1].Err != nil || !rm[1].Removed {
		t.Errorf("Remove of a removed entry and a present one = %+v, %v; want ErrNotFound, then removed", rm, err)
	}
}

// caseTail: entries dead-lettered after Tail are exactly what a scan
// after it finds, also once the newest entry was removed.
func caseTail(t *testing.T, c *contract) {
	if c.s.TailIsRun != "" {
		caseTailIsRun(t, c)
		return
	}
	src := c.open(t)
	if _, ok := src.(backend.Tailer); !ok {
		return // caseCapabilities checked it declares none
	}
	tail := func() string {
		t.Helper()
		return c.tail(t, src)
	}
	later := func(after string) []string {
		t.Helper()
		return ids(c.scan(t, src, after))
	}
	empty := tail()
	got := c.seed(t, src, 1, 3)
	if l := later(empty); !c.sameIDs(l, seededIDs(got)) {
		t.Errorf("scan after the tail of the empty DLQ (%q) = %v, want %v", empty, l, seededIDs(got))
	}
	t1 := tail()
	if l := later(t1); len(l) != 0 {
		t.Errorf("scan after the tail %q = %v, want nothing", t1, l)
	}
	rm, err := mover(t, src).Remove(c.ctx, []backend.MoveItem{got[2].item(3, "")})
	if err != nil || rm[0].Err != nil {
		t.Fatalf("Remove the newest: %+v, %v", rm, err)
	}
	t2 := tail()
	if l := later(t2); len(l) != 0 {
		t.Errorf("scan after the tail %q once the newest was removed = %v, want nothing", t2, l)
	}
	next := c.seed(t, src, 4, 1)
	if l := later(t2); !c.sameIDs(l, seededIDs(next)) {
		t.Errorf("scan after the tail %q = %v, want the entry dead-lettered since: %v", t2, l, next[0].id)
	}
}
