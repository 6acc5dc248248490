package conformance

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// readRounds is how many read-only commands the read cases run: enough
// to push any per-read counter past every delivery limit a broker allows.
const readRounds = 30

// caseReadOnly: thirty read-only commands (stats, list, list by pages as
// the browser reads, show, sample, check, categorize, categorize
// --discover) change nothing the broker holds: the same messages in the
// same order with the same delivery counts as in a twin DLQ seeded alike
// and never read. Every one of them succeeds.
//
// On a broker that cannot be read at all without raising a delivery
// count (Target.ReadCost, where mayCostReads allows it), a DLQ with no
// limit keeps its messages and their order, and its counts may rise: that
// read costs nothing, as nothing counts them. The limited case holds the
// counts on every broker.
func caseReadOnly(t *testing.T, srv *Target) {
	need(t, srv, "Snapshot", srv.Snapshot != nil)
	if srv.ReadCost != "" {
		if mayCostReads()[srv.name] == "" {
			t.Fatalf("%s declares that its reads cost (%s), and the battery allows no backend %s to: every read of it must leave the delivery counts as they were", srv.name, srv.ReadCost, srv.name)
		}
		t.Logf("%s: %s: the delivery counts of a DLQ without a limit are not compared", srv.name, srv.ReadCost)
	}
	readsChangeNothing(t, srv, srv.Fresh, true, srv.ReadCost != "")
}

// caseReadOnlyLimited is caseReadOnly on a DLQ with the lowest delivery
// limit the broker allows: a read may be refused (saying why), but none
// may move any message toward that limit, whatever dlqctl's own records
// say.
func caseReadOnlyLimited(t *testing.T, srv *Target) {
	need(t, srv, "Snapshot", srv.Snapshot != nil)
	need(t, srv, "Limited", srv.Limited != nil)
	readsChangeNothing(t, srv, srv.Limited, false, false)
}

// deliveries is how a Snapshot line gives a message's delivery count.
var deliveries = regexp.MustCompile(`\bdeliveries=\d+`)

func readsChangeNothing(t *testing.T, srv *Target, fresh func(*testing.T) Fixture, mustRead, costs bool) {
	need(t, srv, "Native", srv.Native != nil)
	fx, twin := fresh(t), fresh(t)
	// Written in the broker's own form (import reads the DLQ first), the
	// same envelopes in both: the twin's name fx's origin too.
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i := 1; i <= 12; i++ {
		payload := []byte(fmt.Sprintf(`{"order":%d}`, i))
		e := envelope.Envelope{EventID: fmt.Sprintf("E%03d", i), Fingerprint: envelope.ComputeFingerprint(payload),
			Payload: payload, PayloadEncoding: "json", ContentType: "application/json", Key: fmt.Sprintf("k%d", i%5),
			Origin: envelope.Origin{Topic: fx.Origin}, LastError: "timeout calling payments", Attempts: 3,
			DeadLetteredAt: base.Add(time.Duration(i) * time.Second)}
		srv.Native(t, fx, e, 1)
		srv.Native(t, twin, e, 1)
	}
	var refusals []string
	for i, args := range readCommands(t, fx, readRounds) {
		start := time.Now()
		code, out := RunCommand(t, t.TempDir(), nil, nil, append([]string{"--source", fx.Source}, args...)...)
		if d := time.Since(start); d > 3*time.Second {
			t.Logf("read #%d (%s) took %s", i+1, strings.Join(args, " "), d.Round(time.Millisecond))
		}
		if code == 0 {
			continue
		}
		if mustRead {
			t.Errorf("read #%d (%s): exit %d\n%s", i+1, strings.Join(args, " "), code, out)
		} else {
			refusals = append(refusals, fmt.Sprintf("%s: exit %d: %s", strings.Join(args, " "), code, firstLine(out)))
		}
	}
	if len(refusals) > 0 {
		t.Logf("%d of %d reads refused, e.g. %s", len(refusals), readRounds, refusals[0])
	}
	want, got := srv.Snapshot(t, twin), srv.Snapshot(t, fx)
	if costs {
		for _, lines := range [][]string{want, got} {
			for i, l := range lines {
				lines[i] = deliveries.ReplaceAllString(l, "deliveries=(not compared)")
			}
		}
	}
	if len(want) == 0 {
		t.Fatalf("Snapshot of a DLQ seeded with 12 entries is empty: the hook reads nothing")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d read-only commands changed what the broker holds:\n%s", readRounds, lineDiff(want, got))
	}
}

// readCommands are n read-only command lines over fx, in turn: each kind
// of read, the browser's paging (a first page, then the next from its
// cursor) and a single entry's show among them.
func readCommands(t *testing.T, fx Fixture, n int) [][]string {
	t.Helper()
	code, out := RunCommand(t, t.TempDir(), nil, nil, "--source", fx.Source, "list", "--limit", "3", "-o", "ndjson")
	if code != 0 {
		// A DLQ that refuses reads (a limit) is read by every kind below
		// all the same: each must refuse, or change nothing.
		out = ""
	}
	var first, cursor string
	for _, line := range strings.Split(out, "\n") {
		var doc struct {
			ID     string `json:"id"`
			Schema string `json:"schema"`
			Next   string `json:"next"`
		}
		if json.Unmarshal([]byte(line), &doc) != nil {
			continue
		}
		if doc.Schema == "dlqctl.cursor/v1" {
			cursor = doc.Next
		} else if first == "" {
			first = doc.ID
		}
	}
	kinds := [][]string{
		{"stats", "-o", "json"},
		{"list", "--limit", "0", "-o", "json"},
		{"list", "--limit", "3"},
		{"sample", "--per-category", "2"},
		{"check", "--max-total", "1000"},
		{"categorize"},
		{"categorize", "--discover"},
		{"stats"},
	}
	if cursor != "" {
		kinds = append(kinds, []string{"list", "--after", cursor, "--limit", "3"})
	}
	if first != "" {
		kinds = append(kinds, []string{"show", first})
	}
	cmds := make([][]string, 0, n)
	for i := 0; len(cmds) < n-1; i++ {
		cmds = append(cmds, kinds[i%len(kinds)])
	}
	// The first page above was one read too.
	return cmds
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// lineDiff shows where two snapshots part: the lines only one holds, in
// order.
func lineDiff(want, got []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  a twin never read holds %d lines, the DLQ read holds %d\n", len(want), len(got))
	shown := 0
	for i := 0; (i < len(want) || i < len(got)) && shown < 6; i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			shown++
			fmt.Fprintf(&b, "  #%d never read: %q\n  #%d read:       %q\n", i+1, w, i+1, g)
		}
	}
	return b.String()
}
