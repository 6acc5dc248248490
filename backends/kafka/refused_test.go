package kafkadlq_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
)

// TestRefusedRecordFailsAlone: an entry the origin refuses (too large for
// its max.message.bytes) is a failure of that entry, named; the rest of
// its chunk — on the same partition, so in the same batch — moves.
func TestRefusedRecordFailsAlone(t *testing.T) {
	ctx := ctxFor(t)
	origin := freshTopic(t, "")
	dlt := origin + ".DLT"
	limit := "4000"
	createTopic(t, ctx, origin, 1, map[string]*string{"max.message.bytes": &limit})
	createTopic(t, ctx, dlt, 1, nil)
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	// Random bytes, so that compression does not bring it under the limit.
	noise := make([]byte, 6000)
	rand.Read(noise)
	big := `{"blob":"` + hex.EncodeToString(noise) + `"}`
	produceManual(t, ctx,
		springDeadLetter(dlt, 0, base.Add(1*time.Second), origin, 0, 1, "k", "E1", `{"n":1}`, "boom"),
		springDeadLetter(dlt, 0, base.Add(2*time.Second), origin, 0, 2, "k", "E2", big, "boom"),
		springDeadLetter(dlt, 0, base.Add(3*time.Second), origin, 0, 3, "k", "E3", `{"n":3}`, "boom"),
		springDeadLetter(dlt, 0, base.Add(4*time.Second), origin, 0, 4, "k", "E4", `{"n":4}`, "boom"),
	)
	src := openTopic(t, ctx, dlt, kafkadlq.Options{})
	entries := scanAll(t, ctx, src, "")
	res, err := src.Publish(ctx, itemsOf(entries, origin), backend.Markers{RunID: "run-big"})
	if err != nil {
		t.Fatalf("the chunk failed as a whole: %v", err)
	}
	for i, r := range res {
		if entries[i].EventID == "E2" {
			if r.Err == nil || r.Removed || !strings.Contains(r.Err.Error(), entries[i].ID) || errors.Is(r.Err, backend.ErrNotFound) {
				t.Fatalf("the refused entry: %+v", r)
			}
			continue
		}
		if r.Err != nil || !r.Removed {
			t.Fatalf("entry %s: %+v", entries[i].ID, r)
		}
	}
	count := map[string]int{}
	for _, r := range readCommitted(t, ctx, origin) {
		v, _ := header(r, "event_id")
		count[v]++
	}
	if count["E1"] != 1 || count["E3"] != 1 || count["E4"] != 1 || count["E2"] != 0 {
		t.Fatalf("origin holds %v", count)
	}
	if left := scanAll(t, ctx, src, ""); len(left) != 1 || left[0].EventID != "E2" {
		t.Fatalf("left %s", ids(left))
	}
}
