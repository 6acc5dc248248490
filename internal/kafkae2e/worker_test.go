package kafkae2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/dlqctl/dlqctl/envelope"
)

// buildWorker compiles examples/worker into dir.
func buildWorker(t *testing.T, dir string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "examples", "worker")
	bin := filepath.Join(dir, "worker")
	out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput()
	if err != nil {
		t.Fatalf("build the worker: %v\n%s", err, out)
	}
	return bin
}

func runWorker(t *testing.T, bin string, args ...string) (string, error) {
	c := exec.Command(bin, args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.String(), err
}

type inboxRow struct {
	attempts, effects int
	fingerprint       string
}

func readInbox(t *testing.T, path string) map[string]inboxRow {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT event_id, attempts, effects, fingerprint FROM inbox`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]inboxRow{}
	for rows.Next() {
		var id string
		var r inboxRow
		if err := rows.Scan(&id, &r.attempts, &r.effects, &r.fingerprint); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	return out
}

// TestWorkerDeadLettersRedriveReconcile: the reference worker consumes a
// Kafka topic read_committed and dead-letters as Spring Kafka does; dlqctl
// reads those real dead letters, and plan / approve / apply put them back,
// reconciled against the worker's inbox: one effect per event, with the
// same event ID and fingerprint on the origin.
func TestWorkerDeadLettersRedriveReconcile(t *testing.T) {
	broker := kafkaServer(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	origin := freshTopic(t)
	createTopic(t, ctx, origin, 3)
	cl := client(t)
	var recs []*kgo.Record
	fps := map[string]string{}
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("E%03d", i)
		payload := fmt.Sprintf(`{"order":%d}`, i)
		fps[id] = envelope.ComputeFingerprint([]byte(payload))
		recs = append(recs, &kgo.Record{Topic: origin, Key: []byte("k-" + id), Value: []byte(payload), Headers: []kgo.RecordHeader{
			{Key: "event_id", Value: []byte(id)}, {Key: "fingerprint", Value: []byte(fps[id])}, {Key: "tenant", Value: []byte("acme")},
		}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(dir, "inbox.db")
	wsrc := "kafka://" + broker.Bootstrap() + "?topic=" + origin + "&group=order-workers"
	out, err := runWorker(t, bin, "--source", wsrc, "--inbox", "sqlite:"+inbox, "--fail", "E002", "--fail", "E005",
		"--fail-error", "timeout calling payments", "--until-idle", "3s")
	if err != nil || !strings.Contains(out, "processed=6") {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	src := []string{"--source", source(origin+".DLT", "")}
	code, out := dlqctl(t, dir, nil, append(src, "list", "-o", "json")...)
	if code != 0 || strings.Count(out, `"event_id"`) != 2 || !strings.Contains(out, `"transient"`) {
		t.Fatalf("list of the worker's dead letters: %d\n%s", code, out)
	}
	code, out = dlqctl(t, dir, nil, append(src, "redrive", "plan", "--reason", "payments back", "--rate", "0",
		"--effects", "sqlite:"+inbox, "--settle", "20s", "--out", "p.json")...)
	if code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctl(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	type result struct {
		out string
		err error
	}
	wdone := make(chan result, 1)
	go func() {
		out, err := runWorker(t, bin, "--source", wsrc, "--inbox", "sqlite:"+inbox, "--until-idle", "8s")
		wdone <- result{out, err}
	}()
	code, out = dlqctl(t, dir, nil, append(src, "redrive", "apply", "p.json", "-o", "json")...)
	w := <-wdone
	if w.err != nil {
		t.Fatalf("worker: %v\n%s", w.err, w.out)
	}
	if code != 0 {
		t.Fatalf("apply: %d %s\nworker: %s", code, out, w.out)
	}
	var run struct {
		Status  string `json:"status"`
		Moved   int    `json:"moved"`
		Batches []struct {
			Verdicts map[string]int `json:"verdicts"`
			Gate     string         `json:"gate"`
		} `json:"batches"`
	}
	jsonDoc(t, out, &run)
	// Each event was delivered before (and failed), so its second
	// delivery with one effect is an absorbed duplicate.
	if run.Status != "completed" || run.Moved != 2 || len(run.Batches) != 1 || run.Batches[0].Gate != "pass" ||
		run.Batches[0].Verdicts["absorbed-duplicate"] != 2 {
		t.Fatalf("apply: %s", out)
	}
	rows := readInbox(t, inbox)
	if len(rows) != 6 {
		t.Fatalf("inbox has %d events", len(rows))
	}
	for id, r := range rows {
		if r.effects != 1 || r.fingerprint != fps[id] {
			t.Errorf("%s: effects %d fingerprint %s, want 1 and %s", id, r.effects, r.fingerprint, fps[id])
		}
	}
	// On the origin: the two events twice (original, redrive), same
	// fingerprint header, the redrive without Spring's headers.
	count := originEvents(t, ctx, origin)
	if count["E002"] != 2 || count["E005"] != 2 || count["E001"] != 1 {
		t.Fatalf("origin events %v", count)
	}
}

// TestWorkerReplacesStaleDeadLetterFields: a record that carries the
// dlqctl fields of an earlier dead-lettering (an imported entry, redriven)
// fails again in the reference worker. Its new dead letter has the new
// last_error and time, no stale error_class, and dlqctl lists it by them.
func TestWorkerReplacesStaleDeadLetterFields(t *testing.T) {
	broker := kafkaServer(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	origin := freshTopic(t)
	createTopic(t, ctx, origin, 1)
	rec := &kgo.Record{Topic: origin, Key: []byte("k"), Value: []byte(`{"order":1}`), Headers: []kgo.RecordHeader{
		{Key: "event_id", Value: []byte("E1")},
		{Key: "last_error", Value: []byte("connection reset by peer")},
		{Key: "error_class", Value: []byte("transient")},
		{Key: "dead_lettered_at", Value: []byte("2026-01-02T03:04:05Z")},
		{Key: "attempts", Value: []byte("9")},
		{Key: envelope.ImportedFromProperty, Value: []byte("orders-dlq/1-0")},
	}}
	if err := client(t).ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute)
	out, err := runWorker(t, bin, "--source", "kafka://"+broker.Bootstrap()+"?topic="+origin+"&group=g", "--inbox", "sqlite:"+filepath.Join(dir, "inbox.db"),
		"--fail", "E1", "--fail-error", "403 Forbidden", "--until-idle", "2s")
	if err != nil {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	// The dead letter's own headers: the dlqctl fields rewritten, once.
	cl := client(t, kgo.ConsumeTopics(origin+".DLT"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cl.PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 || len(fs.Records()) != 1 {
		t.Fatalf("read the dead letter: %v, %d records", errs, len(fs.Records()))
	}
	got := map[string][]string{}
	for _, h := range fs.Records()[0].Headers {
		got[h.Key] = append(got[h.Key], string(h.Value))
	}
	if len(got["error_class"]) != 0 || fmt.Sprint(got["last_error"]) != "[403 Forbidden]" || len(got["dead_lettered_at"]) != 1 ||
		got["dead_lettered_at"][0] == "2026-01-02T03:04:05Z" || fmt.Sprint(got["attempts"]) == "[9]" {
		t.Errorf("dead letter headers %v", got)
	}
	code, out := dlqctl(t, dir, nil, "--source", source(origin+".DLT", ""), "list", "-o", "json")
	var doc struct {
		Items []struct {
			LastError      string    `json:"last_error"`
			ErrorClass     string    `json:"error_class"`
			DeadLetteredAt time.Time `json:"dead_lettered_at"`
		} `json:"items"`
	}
	jsonDoc(t, out, &doc)
	if code != 0 || len(doc.Items) != 1 {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	it := doc.Items[0]
	if it.LastError != "403 Forbidden" || it.ErrorClass == "transient" || it.DeadLetteredAt.Before(before) {
		t.Errorf("the new dead letter reads as the old one: last_error %q, error_class %q, dead_lettered_at %v\n%s", it.LastError, it.ErrorClass, it.DeadLetteredAt, out)
	}
}

// TestImportIntoMissingTopic: import does not create a topic, and says so
// in one line naming it and how to create it, not with a bare
// UNKNOWN_TOPIC_OR_PARTITION.
func TestImportIntoMissingTopic(t *testing.T) {
	kafkaServer(t) // source reads the broker it starts
	dir := t.TempDir()
	file := filepath.Join(dir, "one.ndjson")
	if err := os.WriteFile(file, []byte(`{"id":"x-1","event_id":"E1","payload":{"n":1},"origin":{"backend":"redis","topic":"payments"},"last_error":"timeout"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	topic := freshTopic(t) + ".DLT"
	code, out := dlqctl(t, dir, nil, "--source", source(topic, ""), "import", file)
	if code != 2 || !strings.Contains(out, `topic "`+topic+`" does not exist, and import does not create it`) || !strings.Contains(out, "--create") ||
		strings.Contains(out, "UNKNOWN_TOPIC_OR_PARTITION") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("import into a missing topic: exit %d\n%s", code, out)
	}
}
