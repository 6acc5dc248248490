package conformance

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// The cases of this file hold the broker's identities to what they name:
// an identity that repeats across two incarnations of a DLQ, copies that
// nothing tells apart, and two entries that name one message.

// caseRecreatedDLQ: an event is redriven, the DLQ is deleted and made
// again the way the broker does it, and the same event, dead-lettered
// again into the new DLQ moments later, is redriven too — inside the
// origin's deduplication window where the broker has one. The second
// redrive reaches the origin: the consumer receives the event twice.
// Nothing of the old DLQ (a sequence, an offset, a record of removals)
// may pass for the new one's.
func caseRecreatedDLQ(t *testing.T, srv *Target) {
	need(t, srv, "Recreate", srv.Recreate != nil)
	fresh := srv.Fresh
	if srv.Deduplicating != nil {
		fresh = srv.Deduplicating
	}
	fx := fresh(t)
	base := time.Now().UTC().Add(-time.Hour)
	fps := seedAt(t, fx, 1, "timeout", 1, func(int) (string, int) { return "E001", 1 }, base)
	first := t.TempDir()
	if n := len(planAll(t, first, fx)); n != 1 {
		t.Fatalf("the first plan takes %d entries, want 1", n)
	}
	if code, out := RunCommand(t, first, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json"); code != 0 {
		t.Fatalf("the first redrive: exit %d\n%s", code, out)
	}
	// The consumer takes the event (and fails it again).
	inbox := filepath.Join(first, "inbox.db")
	if r := consumeAll(t, fx, inbox)["E001"]; r.Attempts != 1 {
		t.Fatalf("E001 reached the consumer %d times after the first redrive, want 1", r.Attempts)
	}
	srv.Recreate(t, fx)
	// The same dead letter, byte for byte, in the new DLQ.
	seedAt(t, fx, 1, "timeout", 1, func(int) (string, int) { return "E001", 1 }, base)
	second := t.TempDir()
	if n := len(planAll(t, second, fx)); n != 1 {
		t.Fatalf("the second plan takes %d entries, want the dead letter of the new DLQ: what was removed from the old one hides it", n)
	}
	if !completes(t, second, fx, "the second redrive", 1, "apply", "p.json") {
		t.FailNow()
	}
	if n := dlqLen(t, fx); n != 0 {
		t.Errorf("%d entries left in the new DLQ", n)
	}
	rows := consumeAll(t, fx, inbox)
	if r := rows["E001"]; r.Attempts != 2 || r.Effects != 1 || r.Fingerprint != "" && r.Fingerprint != fps["E001"] {
		t.Errorf("E001 at the consumer: %d attempts, %d effects; want 2 attempts (one per redrive, the second not taken for a duplicate of the first) and 1 effect", r.Attempts, r.Effects)
	}
}

// identicalEvent is the dead letter the identical-copies case writes
// three times.
func identicalEvent(fx Fixture) envelope.Envelope {
	payload := []byte(`{"order":777}`)
	return envelope.Envelope{
		EventID: "E777", Fingerprint: envelope.ComputeFingerprint(payload), Payload: payload, PayloadEncoding: "json",
		ContentType: "application/json", Key: "k7", Origin: envelope.Origin{Topic: fx.Origin},
		LastError: "timeout calling payments", Attempts: 3,
		DeadLetteredAt: time.Now().UTC().Add(-time.Hour).Truncate(time.Second),
	}
}

// caseIdenticalCopies: three byte-identical dead letters (a producer that
// retried its publish, an event dead-lettered three times alike), written
// in the broker's own form: each is an entry; a plan that takes all three
// moves three, one a batch, with no false halt; the DLQ ends empty, and
// the consumer receives the event three times.
func caseIdenticalCopies(t *testing.T, srv *Target) {
	need(t, srv, "Native", srv.Native != nil)
	fx := srv.Fresh(t)
	e := identicalEvent(fx)
	srv.Native(t, fx, e, 3)
	if n := countEvent(t, fx, e.EventID); n != 3 {
		t.Fatalf("list shows %d entries of %s after the Native hook wrote three: want 3", n, e.EventID)
	}
	dir := t.TempDir()
	// One entry a batch: the DLQ is read again between the moves, so
	// what tells the copies apart must hold while some have left.
	if n := len(planAll(t, dir, fx, "--ramp", "1", "--burst", "1")); n != 3 {
		t.Fatalf("the plan takes %d of the 3 identical entries", n)
	}
	if !completes(t, dir, fx, "apply of 3 identical entries", 3, "apply", "p.json") {
		t.FailNow()
	}
	steps := journalSteps(t, filepath.Join(dir, "p.journal"))
	for seq := 1; seq <= 3; seq++ {
		if ss := steps[seq]; len(ss) == 0 || ss[len(ss)-1] != "removed" {
			t.Errorf("entry %d of 3: journal steps %v, want it removed", seq, ss)
		}
	}
	if n := dlqLen(t, fx); n != 0 {
		t.Errorf("%d entries left in the DLQ, want 0", n)
	}
	if srv.Held != nil {
		if n := srv.Held(t, fx); n != 0 {
			t.Errorf("the broker still holds %d of the identical dead letters", n)
		}
	}
	rows := consumeAll(t, fx, filepath.Join(dir, "inbox.db"))
	if r := rows[e.EventID]; r.Attempts != 3 || r.Effects != 1 {
		t.Errorf("%s at the consumer: %d attempts, %d effects; want 3 (one per copy) and 1", e.EventID, r.Attempts, r.Effects)
	}
}

// countEvent counts fx's entries of eventID (list).
func countEvent(t *testing.T, fx Fixture, eventID string) int {
	t.Helper()
	n := 0
	for _, it := range listItems(t, fx) {
		if it.EventID == eventID {
			n++
		}
	}
	return n
}

// caseTwoPointers: two DLQ entries that point at one message (two
// advisories about one stream message, two share-group dead letters
// about one record) are one move: a plan that takes both puts the
// message back once, and both entries leave the DLQ.
func caseTwoPointers(t *testing.T, srv *Target) {
	need(t, srv, "TwoPointers", srv.TwoPointers != nil)
	fx, eventID := srv.TwoPointers(t)
	if n := countEvent(t, fx, eventID); n != 2 {
		t.Fatalf("list shows %d entries of %s after the TwoPointers hook: want 2", n, eventID)
	}
	dir := t.TempDir()
	entries := planAll(t, dir, fx)
	if len(entries) != 2 {
		t.Fatalf("the plan takes %d of the 2 entries: %+v", len(entries), entries)
	}
	if !completes(t, dir, fx, "apply", -1, "apply", "p.json") {
		t.FailNow()
	}
	if n := dlqLen(t, fx); n != 0 {
		t.Errorf("%d entries left in the DLQ, want 0", n)
	}
	rows := consumeAll(t, fx, filepath.Join(dir, "inbox.db"))
	if r := rows[eventID]; r.Attempts != 1 || r.Effects != 1 {
		journal := fmt.Sprint(journalSteps(t, filepath.Join(dir, "p.journal")))
		t.Errorf("%s at the consumer: %d attempts, %d effects; want 1 and 1 (two entries naming one message are one move); journal steps %s", eventID, r.Attempts, r.Effects, journal)
	}
}

// mustJSONString decodes the first JSON document in s.
func mustJSONString(t *testing.T, s string, v any) {
	t.Helper()
	i := strings.Index(s, "{")
	if i < 0 {
		t.Fatalf("no JSON in %s", s)
	}
	if err := json.NewDecoder(strings.NewReader(s[i:])).Decode(v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
}
