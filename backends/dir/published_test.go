package dirqueue

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// A moved file is found in the inbox by the run's markers; once the
// consumer took it, the inbox cannot tell.
func TestCheckPublished(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	e := put(t, q, "0001", `{"n":1}`, true, 0)
	m := backend.Markers{RunID: "run-1"}
	it := item(1, e, "")
	res, err := q.Publish(ctx, []backend.MoveItem{it}, m)
	if err != nil || res[0].Err != nil {
		t.Fatalf("publish: %+v %v", res, err)
	}
	query := []backend.PublishedQuery{{Item: it, DestID: res[0].DestID, Since: time.Now()}}
	if got, err := q.CheckPublished(ctx, query, m); err != nil || got[0] != backend.PresenceFound {
		t.Errorf("moved file: %v %v", got, err)
	}
	if got, _ := q.CheckPublished(ctx, query, backend.Markers{RunID: "run-2"}); got[0] != backend.PresenceUnknown {
		t.Errorf("another run: %v", got)
	}
	os.Remove(filepath.Join(q.DefaultDest(""), res[0].DestID))
	if got, _ := q.CheckPublished(ctx, query, m); got[0] != backend.PresenceUnknown {
		t.Errorf("taken by the consumer: %v", got)
	}
}
