package sqsdlq_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
	"github.com/dlqctl/dlqctl/envelope"
)

// lostSendTransport is a fake around the real server, for a fault
// ElasticMQ cannot make on cue: the answer of a SendMessageBatch lost on
// the way back. It passes every call through, but swallows the answer of
// the first SendMessageBatch: the server has enqueued the messages, while
// the client sees its connection reset.
type lostSendTransport struct {
	mu    sync.Mutex
	sends int // SendMessageBatch calls that reached the server
}

func (l *lostSendTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body, ok, err := callBody(r, "SendMessageBatch")
	if !ok || err != nil {
		return passOn(r, body, err)
	}
	resp, err := passOn(r, body, nil)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.sends++
	first := l.sends == 1
	l.mu.Unlock()
	if first {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errors.New("read tcp: connection reset by peer (fault injected: the answer is lost)")
	}
	return resp, nil
}

// TestLostSendIsUnknown: a move's SendMessageBatch whose answer is lost
// is an unknown outcome, never sent again by the SDK: Publish fails (the
// run journals the chunk as unknown, and its resume resends it journaled
// ambiguous), and each message reached the destination once. The SDK's
// retry sent the batch a second time, and Publish reported success,
// before. A FIFO destination drops the resume's resend (same run, same
// entries: the same deduplication IDs).
func TestLostSendIsUnknown(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		name := "standard"
		if fifo {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			p := newPair(t, ctx, fifo, 2)
			const n = 10
			for i := range n {
				ev := event{id: fmt.Sprintf("L%02d", i), body: fmt.Sprintf(`{"n":%d}`, i), attrs: map[string]string{"origin_stream": p.srcName}}
				if fifo {
					ev.group = ev.id // a group each: a FIFO scan sees one receive's worth of a group
				}
				send(t, ctx, p.dlq, ev)
			}
			l := &lostSendTransport{}
			q, err := sqsdlq.Open(ctx, p.sourceURL("receivers=1"), sqsdlq.Options{Client: sqsServer(t).ClientVia(l)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			its := items(scanAll(t, ctx, q), func(envelope.Envelope) string { return p.srcName })
			m := backend.Markers{RunID: "run-lost-send"}
			if res, err := q.Publish(ctx, its, m); err == nil {
				t.Fatalf("Publish whose answer was lost returned no error (%d SendMessageBatch calls reached the server): the SDK sent it again, and its results %+v say done", l.sends, res[0])
			}
			if l.sends != 1 {
				t.Errorf("%d SendMessageBatch calls reached the server after the first answer was lost, want 1: a resend must come only from a resume", l.sends)
			}
			if fifo {
				// The resume's resend, as the engine makes it.
				res, err := q.Publish(ctx, its, m)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					if r.Err != nil {
						t.Fatalf("resend, item %d: %v", i, r.Err)
					}
				}
			}
			var got []string
			if fifo {
				for _, msg := range drainFIFO(t, ctx, p.src) {
					got = append(got, *msg.Body)
				}
			} else {
				for _, msg := range drain(t, ctx, p.src) {
					got = append(got, *msg.Body)
				}
			}
			seen := map[string]int{}
			for _, b := range got {
				seen[b]++
			}
			if len(got) != n || len(seen) != n {
				t.Errorf("the destination holds %d messages (%d distinct) of the %d sent once: %v", len(got), len(seen), n, seen)
			}
		})
	}
}
