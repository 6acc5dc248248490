package natsdlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/redrive"
)

// step is an entry's last journaled step, with its note.
type step struct {
	typ, note, eventID string
}

// journalSteps reads the journal of the plan p.json in dir: each entry's
// last step, by the entry's DLQ id.
func journalSteps(t *testing.T, dir string) map[string]step {
	t.Helper()
	steps, err := readSteps(dir)
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

// journalStepsIfAny is journalSteps of a journal that may not exist yet
// or may end in a write cut short.
func journalStepsIfAny(t *testing.T, dir string) map[string]step {
	t.Helper()
	steps, _ := readSteps(dir)
	return steps
}

func readSteps(dir string) (map[string]step, error) {
	p, err := redrive.ReadPlan(filepath.Join(dir, "p.json"))
	if err != nil {
		return nil, err
	}
	steps := map[string]step{}
	_, err = redrive.ScanJournal(filepath.Join(dir, "p.journal"), nil, func(r redrive.Record) error {
		if i, ok := p.Entries.Index(r.Seq); ok && r.Seq > 0 {
			en := p.Entries.At(i)
			steps[en.ID] = step{typ: r.Type, note: r.Note, eventID: en.EventID}
		}
		return nil
	})
	return steps, err
}

// applyAll plans every entry of source, approves and applies the plan in
// dir, and returns the run's document.
func applyAll(t *testing.T, dir, source string, flags ...string) (moved int, status string) {
	t.Helper()
	planApprove(t, dir, source, append([]string{"--rate", "0", "--allow-disposition", "investigate,fix-then-redrive"}, flags...)...)
	code, out := conformance.RunCommand(t, dir, nil, nil, "--source", source, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	var run struct {
		Status string `json:"status"`
		Moved  int    `json:"moved"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &run); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	return run.Moved, run.Status
}

// TestAdvisoriesAboutOneMessage: two advisories about one stream message
// are one move. A durable consumer deleted and made again (a redeploy)
// fails the same messages again; an advisory stream on a wildcard captures
// two consumers that both give up on a message. The plan takes every
// advisory; the run publishes each message once, removes every advisory,
// and the journal says of each second advisory which entry moved its
// message.
func TestAdvisoriesAboutOneMessage(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	publish := func(t *testing.T, subj string, ids ...string) {
		t.Helper()
		for i, id := range ids {
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {id}}, Data: []byte(fmt.Sprintf(`{"order":%d}`, i+1))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// check: each event back on the origin once, no advisory and no
	// original left, and every second advisory journaled removed with
	// nothing published, naming the entry that moved its message.
	check := func(t *testing.T, fx *termFixture, dir string, moved int, firsts map[string]string) {
		t.Helper()
		if got := redrivenCopies(t, fx.origin); len(got) != len(firsts) {
			t.Errorf("the origin holds the redrives %v, want %d (one per message)", got, len(firsts))
		}
		if n := msgs(t, mustStream(t, fx.js, fx.advName)); n != 0 {
			t.Errorf("%d advisories left", n)
		}
		again := 0
		steps := journalSteps(t, dir)
		if moved != len(steps) {
			t.Errorf("the run moved %d entries, want all %d", moved, len(steps))
		}
		for id, r := range steps {
			first, ok := firsts[r.eventID]
			switch {
			case !ok:
				t.Errorf("entry %s: event %q", id, r.eventID)
			case id == first && (r.typ != redrive.RecRemoved || r.note != ""):
				t.Errorf("entry %s (first about %s): %s %q", id, r.eventID, r.typ, r.note)
			case id != first && (r.typ != redrive.RecRemoved || !strings.Contains(r.note, "which the entry "+first+" moved: nothing published")):
				t.Errorf("entry %s (again about %s): %s %q, want removed, naming the entry %s", id, r.eventID, r.typ, r.note, first)
			case id != first:
				again++
			}
		}
		if again == 0 {
			t.Error("no second advisory in the journal")
		}
	}

	t.Run("consumer re-created", func(t *testing.T) {
		fx := newTermFixture(t, srv, js)
		publish(t, fx.subj, "E1", "E2")
		fx.term(t, fx.cons, 2)
		if err := js.DeleteConsumer(ctx, fx.stream, "workers"); err != nil {
			t.Fatal(err)
		}
		fx.term(t, fx.consumer(t, "workers"), 2) // the redeploy fails both again
		fx.advisories(t, 4)
		// One entry a batch: the second advisory about a message comes
		// after the first one's move has deleted the message.
		dir := t.TempDir()
		moved, status := applyAll(t, dir, fx.source, "--ramp", "1")
		if status != "completed" {
			t.Errorf("status %q", status)
		}
		check(t, fx, dir, moved, map[string]string{"E1": "1", "E2": "2"})
	})

	t.Run("wildcard stream, two consumers", func(t *testing.T) {
		fx := newTermFixture(t, srv, js)
		if err := js.DeleteStream(ctx, fx.advName); err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fx.advName, Storage: jetstream.FileStorage, AllowDirect: true,
			Subjects: []string{"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED." + fx.stream + ".*", "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + fx.stream + ".*"}}); err != nil {
			t.Fatal(err)
		}
		publish(t, fx.subj, "E1")
		fx.term(t, fx.cons, 1)
		fx.term(t, fx.consumer(t, "audit"), 1)
		fx.advisories(t, 2)
		dir := t.TempDir()
		moved, status := applyAll(t, dir, fx.source)
		if status != "completed" {
			t.Errorf("status %q", status)
		}
		check(t, fx, dir, moved, map[string]string{"E1": "1"})
	})
}
