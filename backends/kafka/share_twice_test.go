package kafkadlq_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/conformance"
)

// TestShareDuplicatesAcrossProcesses: two dead letters of one source
// record (a broker that retried its dead-letter write), the first moved by
// one dlqctl process and the second planned and applied by another, which
// knows nothing of the first but what the state topic says: the share
// group takes the record once.
func TestShareDuplicatesAcrossProcesses(t *testing.T) {
	ctx := ctxFor(t)
	f := shareTwiceFixture(t)
	if len(f.dead) != 1 {
		t.Fatalf("%s: %d dead letters, want 1", f.dlq, len(f.dead))
	}
	d := f.dead[0]
	produceManual(t, ctx, &kgo.Record{Topic: f.dlq, Key: d.Key, Value: d.Value, Headers: d.Headers})
	source := "kafka://" + kafkaServer(t).Bootstrap() + "?topic=" + f.dlq
	// The broker's message says only "rejected": category unknown.
	planFlags := []string{"--source", source, "redrive", "plan", "--reason", "x", "--out", "p.json", "--rate", "0",
		"--settle", "0s", "--unverified-ok", "--allow-disposition", "investigate"}
	run := func(dir string, extra ...string) string {
		t.Helper()
		for _, args := range [][]string{
			append(append([]string{}, planFlags...), extra...),
			{"redrive", "approve", "p.json", "--by", "oncall"},
			{"--source", source, "redrive", "apply", "p.json"},
		} {
			if code, out := conformance.RunCommand(t, dir, nil, nil, args...); code != 0 {
				t.Fatalf("dlqctl %s: exit %d\n%s", strings.Join(args, " "), code, out)
			}
		}
		j, err := os.ReadFile(filepath.Join(dir, "p.journal"))
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	first := run(t.TempDir(), "--max", "1")
	second := run(t.TempDir())
	if strings.Contains(second, `"published"`) || !strings.Contains(second, "nothing published, entry resolved") {
		t.Errorf("the second process published the record again, or did not say why not:\nfirst:\n%s\nsecond:\n%s", first, second)
	}
	if left := scanAll(t, ctx, openTopic(t, ctx, f.dlq, kafkadlq.Options{}), ""); len(left) != 0 {
		t.Errorf("left in the DLQ: %+v", left)
	}
	if acks := shareAccept(t, ctx, f); len(acks) != 1 || acks[0].Action != "ACCEPT" || acks[0].Value != "poison-0" {
		t.Fatalf("the share group took %+v, want poison-0 once", acks)
	}
}
