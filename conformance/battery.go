package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/internal/workertest"
)

// The battery asks every backend, on its real server, the questions where
// a broker's own behaviour put "nothing lost, nothing twice" at risk: a
// broker crash right after a run and in the middle of one, a DLQ deleted
// and made again, reads that must change nothing, byte-identical dead
// letters, two entries that point at one message, a connection cut while
// publishes await their confirms, a second run from another PID
// namespace, and dlqctl's own records in the broker (surviving the
// broker's housekeeping, and a record dlqctl did not write changing
// nothing).
//
// Each case needs hooks in the backend's Target. A backend where a case
// cannot arise declares it in Target.NotApplicable with the reason; only
// the declarations mayNotApply allows are accepted, so that no case is
// silenced by declaring it. A hook that is missing otherwise fails the
// case, saying which.

// batteryCase is one question of the battery.
type batteryCase struct {
	name string
	run  func(*testing.T, *Target)
}

// batteryCases are the battery's cases, in the order they run.
func batteryCases() []batteryCase {
	return []batteryCase{
		{"broker-crash", caseBrokerCrash},
		{"recreated-dlq", caseRecreatedDLQ},
		{"read-only", caseReadOnly},
		{"read-only-limited", caseReadOnlyLimited},
		{"identical-copies", caseIdenticalCopies},
		{"two-pointers", caseTwoPointers},
		{"conn-drop", caseConnDrop},
		{"pid-namespace", casePIDNamespace},
		{"forged-record", caseForgedRecord},
		{"bookkeeping-destination", caseBookkeepingDestination},
		{"random-kills", caseRandomKills},
	}
}

// mayNotApply is which backend may declare which battery case (or case
// of the suite) not applicable, and why the case cannot arise there. A declaration not in
// this list fails the battery; changing the list is a review of its own
// (battery_test.go holds it). An entry backend/shape allows it only to a
// target of that shape (Target.Shape), where a backend reads DLQs of
// several shapes and the case arises on some.
func mayNotApply() map[string]map[string]string {
	return map[string]map[string]string{
		"broker-crash": {
			"dir": "no server: the DLQ is a folder, and a move is a rename in it",
		},
		"conn-drop": {
			"dir": "no connection: a move is a rename in a local folder",
		},
		"read-only-limited": {
			"dir":             "no delivery count: a read opens files",
			"redis":           "a read is XRANGE: no delivery count, no limit",
			"kafka":           "a read fetches by offset: no delivery count, no limit",
			"nats":            "a read gets messages by sequence: no delivery count, no limit",
			"pulsar":          "the DLQ has no limit of its own: a redelivery count limit is a consumer's setting, and dlqctl's reads go through its own subscription",
			"rabbitmq/stream": "a stream is read by offset: no delivery count, no limit (the classic target asks it of a quorum DLQ)",
		},
		"two-pointers": {
			"dir":      "an entry is a file holding its dead letter whole",
			"redis":    "an entry is a stream entry holding its dead letter whole",
			"pulsar":   "an entry is a message holding its dead letter whole",
			"sqs":      "an entry is the message itself, moved by SQS",
			"rabbitmq": "an entry is a dead-lettered copy holding the message whole",
		},
		"bookkeeping-destination": {
			"dir": "nothing of dlqctl's is a destination: its lease is a file beside the DLQ folder, and a destination is a folder",
			"sqs": "nothing of dlqctl's is a destination: its lease is a tag on the DLQ",
		},
		"identical-copies": {
			"kafka/share": "byte-identical share-group dead letters (a broker that retried its dead-letter write) stand for one source record: they are one move, which two-pointers asks",
		},
		"refused-destination": {
			"kafka/share": "a share-group dead letter's origin is the topic that holds its source record: one naming the DLQ itself stands for a record of the DLQ, an entry of its own; the plain target asks the case, --to included",
		},
		"forged-record": {
			"dir":   "no record of removals: a move takes the file itself out",
			"redis": "no record of removals: a move deletes the stream entry (XDEL)",
			"nats":  "no record of removals: a move deletes the copy (and, for an advisory, the message) by sequence",
			"sqs":   "no record of removals: a move deletes the message",
		},
	}
}

// mayCostReads is which backend may declare that its reads cost
// (Target.ReadCost), and why no read of it is free.
func mayCostReads() map[string]string {
	return map[string]string{
		"sqs": "SQS has no read but a receive, and every receive raises the message's ApproximateReceiveCount",
	}
}

// mayDeclare is why mayNotApply lets who (a backend, or backend/shape)
// declare the case c not applicable: the shape's own entry, else the
// backend's; "" when it does not.
func mayDeclare(c, who string) string {
	allowed := mayNotApply()[c]
	if why := allowed[who]; why != "" {
		return why
	}
	backend, _, _ := strings.Cut(who, "/")
	return allowed[backend]
}

// declarant is who srv's declarations are checked as: its backend, with
// its shape where it has one.
func (srv *Target) declarant() string {
	if srv.Shape != "" {
		return srv.name + "/" + srv.Shape
	}
	return srv.name
}

// checkDeclarations fails for every not-applicable declaration of name
// (a backend, or backend/shape) that mayNotApply does not allow, and for
// a declaration without reason.
func checkDeclarations(name string, declared map[string]string) []string {
	var bad []string
	for c, why := range declared {
		switch {
		case !slices.ContainsFunc(append(batteryCases(), suiteCases()...), func(bc batteryCase) bool { return bc.name == c }):
			bad = append(bad, fmt.Sprintf("%s declares %q not applicable, and the battery has no such case", name, c))
		case mayDeclare(c, name) == "":
			bad = append(bad, fmt.Sprintf("%s declares %q not applicable (%s), and the battery allows no backend %s to: "+
				"the case arises there, so it must pass (or the list in mayNotApply must change, with its reason)", name, c, why, name))
		case strings.TrimSpace(why) == "":
			bad = append(bad, fmt.Sprintf("%s declares %q not applicable without a reason", name, c))
		}
	}
	sort.Strings(bad)
	return bad
}

// runBattery runs every battery case on srv as a subtest of its own.
func runBattery(t *testing.T, srv *Target) {
	for _, msg := range checkDeclarations(srv.declarant(), srv.NotApplicable) {
		t.Error(msg)
	}
	runCases(t, srv, batteryCases())
}

// runCases runs each case on srv as a subtest of its own, but for those
// srv declares not applicable where mayNotApply allows it.
func runCases(t *testing.T, srv *Target, cases []batteryCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := srv.NotApplicable[c.name]; ok && mayDeclare(c.name, srv.declarant()) != "" {
				t.Logf("not applicable on %s: %s", srv.declarant(), why)
				return
			}
			c.run(t, srv)
		})
	}
}

// need fails t when a hook the case needs is missing.
func need(t *testing.T, srv *Target, hook string, ok bool) {
	t.Helper()
	if !ok {
		t.Fatalf("%s: the conformance harness has no %s hook (Target.%s): add one, or declare the case not applicable where mayNotApply allows it", srv.name, hook, hook)
	}
}

// planEntries reads the entries of the plan file path.
func planEntries(t *testing.T, path string) []planEntry {
	t.Helper()
	return readPlan(t, path).Entries
}

// planDoc is what the cases read of a plan file: what it takes and what
// it leaves out, and why.
type planDoc struct {
	Entries  []planEntry `json:"entries"`
	Excluded []struct {
		EventID string `json:"event_id"`
		Why     string `json:"why"`
		HeldBy  string `json:"held_by"`
	} `json:"excluded"`
}

type planEntry struct {
	ID      string `json:"id"`
	EventID string `json:"event_id"`
	Dest    string `json:"dest"`
}

// readPlan reads the plan file path.
func readPlan(t *testing.T, path string) planDoc {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var plan planDoc
	mustJSON(t, raw, &plan)
	return plan
}

// planAll writes p.json in dir: every entry of fx (fastPlan), approved. It
// returns the plan's entries.
func planAll(t *testing.T, dir string, fx Fixture, flags ...string) []planEntry {
	t.Helper()
	planAndApprove(t, dir, fx, "redrive", append(append([]string{}, fastPlan...), flags...)...)
	return planEntries(t, filepath.Join(dir, "p.json"))
}

// journalSteps reads a journal: per plan sequence number, the entry steps
// it records, in order.
func journalSteps(t *testing.T, path string) map[int][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	steps := map[int][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		var r struct {
			Type string `json:"type"`
			Seq  *int   `json:"seq"`
		}
		if json.Unmarshal([]byte(line), &r) != nil || r.Seq == nil {
			continue
		}
		steps[*r.Seq] = append(steps[*r.Seq], r.Type)
	}
	return steps
}

// eventsWith is the event IDs of the plan entries (by sequence, from 1)
// whose journal steps include step.
func eventsWith(entries []planEntry, steps map[int][]string, step string) map[string]bool {
	ids := map[string]bool{}
	for seq, ss := range steps {
		if seq >= 1 && seq <= len(entries) && slices.Contains(ss, step) {
			ids[entries[seq-1].EventID] = true
		}
	}
	return ids
}

// checkOnceOutsideAmbiguous: every seeded event had one effect with its
// fingerprint, and reached the consumer more than once only where a
// journal records a resend of unknown outcome (ambiguous) for it. An
// event that never reached the consumer is lost unless fx's DLQ still
// holds it (a run that stopped early, failing its own check).
func checkOnceOutsideAmbiguous(t *testing.T, fx Fixture, fps map[string]string, rows map[string]workertest.Row, ambiguous map[string]bool) {
	t.Helper()
	var left map[string]bool
	var stillIn []string
	for _, id := range sortedKeys(fps) {
		r, ok := rows[id]
		if !ok && left == nil {
			left = map[string]bool{}
			for _, it := range listItems(t, fx) {
				left[it.EventID] = true
			}
		}
		switch {
		case !ok && left[id]:
			stillIn = append(stillIn, id)
		case !ok:
			t.Errorf("%s never reached the consumer and is not in the DLQ: lost", id)
		case r.Effects != 1:
			t.Errorf("%s: %d effects, want 1", id, r.Effects)
		case r.Fingerprint != "" && r.Fingerprint != fps[id]:
			t.Errorf("%s: the consumer saw fingerprint %s, the DLQ had %s", id, r.Fingerprint, fps[id])
		case r.Attempts != 1 && !ambiguous[id]:
			t.Errorf("%s reached the consumer %d times, and no journal records a resend of unknown outcome (ambiguous) for it: moved twice", id, r.Attempts)
		}
	}
	if len(stillIn) > 0 {
		t.Errorf("%d events never reached the consumer and are still in the DLQ (not moved): %v", len(stillIn), stillIn)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// completes runs `redrive CMD…` (apply p.json, resume p.journal) on fx in
// dir and reports, as what, an exit other than 0, a run that did not
// complete or halted, and another count moved than moved (-1: any). It
// says whether the run completed.
func completes(t *testing.T, dir string, fx Fixture, what string, moved int, cmd ...string) bool {
	t.Helper()
	code, out := RunCommand(t, dir, nil, nil, append([]string{"--source", fx.Source, "-o", "json", "redrive"}, cmd...)...)
	if code != 0 {
		t.Errorf("%s: exit %d, want 0\n%s", what, code, tail(out))
		return false
	}
	d := parseRun(t, out)
	if d.Status != "completed" || d.HaltedBy != "" || moved >= 0 && d.Moved != moved {
		t.Errorf("%s: %s, moved %d, halted by %q; want completed (moved %d; -1: any)", what, d.Status, d.Moved, d.HaltedBy, moved)
		return false
	}
	return true
}

// Fields writes m as " key=value" pairs in key order: the fields of a
// message in a Snapshot line.
func Fields[V any](m map[string]V) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, " %s=%v", k, m[k])
	}
	return b.String()
}

// statsDoc is stats -o json: the total, and the backend's section as is.
type statsDoc struct {
	Total   int             `json:"total"`
	Backend json.RawMessage `json:"backend"`
}

func stats(t *testing.T, fx Fixture) statsDoc {
	t.Helper()
	code, out := RunCommand(t, t.TempDir(), nil, nil, "--source", fx.Source, "stats", "-o", "json")
	if code != 0 {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	var s statsDoc
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("stats printed no JSON: %s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return s
}

// cameBack is what stats says came back (backend.came_back): entries a
// run removed that the broker handed back, left out of the total.
func (s statsDoc) cameBack() (int, bool) {
	var b struct {
		CameBack *int `json:"came_back"`
	}
	if json.Unmarshal(s.Backend, &b) != nil || b.CameBack == nil {
		return 0, false
	}
	return *b.CameBack, true
}
