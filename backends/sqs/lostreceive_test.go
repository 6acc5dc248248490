package sqsdlq_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
)

// lossyTransport is a fake around the real server, for a fault ElasticMQ
// cannot make: an answer lost on the way back. It passes every call
// through, but swallows the answer of the nth ReceiveMessage call that
// hands out messages: the server has handed them out (they are in flight
// for the call's visibility timeout), while the client sees its
// connection reset, and the SDK asks again. With vis set, that call asks
// the server for a visibility timeout of vis seconds instead of its own.
type lossyTransport struct {
	n   int
	vis int

	mu     sync.Mutex
	served int // ReceiveMessage answers with messages so far
	lost   int // messages in the answer swallowed
}

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body, ok, err := callBody(r, "ReceiveMessage")
	if !ok || err != nil {
		return passOn(r, body, err)
	}
	l.mu.Lock()
	next := l.served + 1
	l.mu.Unlock()
	if next == l.n && l.vis > 0 {
		var in map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, err
		}
		in["VisibilityTimeout"] = l.vis
		body, _ = json.Marshal(in)
	}
	resp, err := passOn(r, body, nil)
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var msgs struct{ Messages []json.RawMessage }
	_ = json.Unmarshal(out, &msgs)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(msgs.Messages) > 0 {
		l.served++
		if l.served == l.n {
			l.lost = len(msgs.Messages)
			return nil, errors.New("read tcp: connection reset by peer (fault injected: the answer is lost)")
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	return resp, nil
}

// callBody reads the body of r, a call to the server, when it is of the
// SQS action; ok is false (and nothing read) for any other call.
func callBody(r *http.Request, action string) (body []byte, ok bool, err error) {
	if r.Header.Get("X-Amz-Target") != "AmazonSQS."+action {
		return nil, false, nil
	}
	body, err = io.ReadAll(r.Body)
	return body, true, err
}

// passOn sends r to the server, with body (read by callBody) when not
// nil, unless err.
func passOn(r *http.Request, body []byte, err error) (*http.Response, error) {
	if err != nil {
		return nil, err
	}
	if body != nil {
		r = r.Clone(r.Context())
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// openLossy opens the pair's DLQ through a lossyTransport, its scans
// receiving with a visibility timeout of scanVis.
func openLossy(t *testing.T, p pair, l *lossyTransport, scanVis time.Duration) *sqsdlq.Queue {
	t.Helper()
	q, err := sqsdlq.Open(testCtx(t), p.sourceURL("receivers=1"), sqsdlq.Options{Client: sqsServer(t).ClientVia(l)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	q.SetScanVisibility(scanVis)
	return q
}

// TestScanLostReceive: a scan one of whose receives never got its answer
// (its messages in flight, nobody holding their receipt handles) waits
// for them to be visible again — within the scan's visibility timeout —
// and hands over every message, with nothing reported unseen. It saw 40
// of 50, and said nothing, before. The first answer is the one lost:
// ElasticMQ hands out no message whose visibility ended while one
// received before it, whose visibility was extended since, is in flight
// (the scan extends what it holds), so a later lost answer comes back on
// ElasticMQ only once the scan ends; TestScanLostReceiveReported covers
// a scan that cannot get them back.
func TestScanLostReceive(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 50
	fillDLQ(t, p, n)
	l := &lossyTransport{n: 1}
	q := openLossy(t, p, l, 3*time.Second)
	begin := time.Now()
	got := scanAll(t, ctx, q)
	if l.lost == 0 {
		t.Fatal("no receive answer was lost: the fault did not happen")
	}
	if len(got) != n || q.Unseen() != 0 {
		t.Fatalf("a scan with %d messages of a lost answer saw %d of %d, %d reported unseen; want all %d", l.lost, len(got), n, q.Unseen(), n)
	}
	if d := time.Since(begin); d > 3*time.Second+2*time.Second+5*time.Second {
		t.Errorf("the scan took %s: longer than its visibility timeout and margin warrant", d)
	}
	if v, f := counts(t, ctx, p.dlq); v != n || f != 0 {
		t.Fatalf("after the scan %d visible, %d in flight; want %d, 0", v, f, n)
	}
}

// TestScanLostReceiveReported: when the messages of a lost receive stay
// in flight longer than the scan waits (here the lost call took them for
// two minutes), the scan ends short of the count it began with and says
// by how much: Unseen and the stats' not_seen count them, with a warning,
// so check --max-total counts them too.
func TestScanLostReceiveReported(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 50
	fillDLQ(t, p, n)
	l := &lossyTransport{n: 3, vis: 120}
	q := openLossy(t, p, l, 2*time.Second)
	begin := time.Now()
	got := scanAll(t, ctx, q)
	if l.lost == 0 {
		t.Fatal("no receive answer was lost: the fault did not happen")
	}
	if len(got)+l.lost != n || q.Unseen() != int64(l.lost) {
		t.Fatalf("scan saw %d, %d reported unseen; want %d and %d (the lost answer's)", len(got), q.Unseen(), n-l.lost, l.lost)
	}
	if d := time.Since(begin); d > 2*time.Second+2*time.Second+5*time.Second {
		t.Errorf("the scan took %s waiting for messages it could not get: longer than its bound", d)
	}
	x, err := q.Extras(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	sx := x.JSON.(sqsdlq.SQSExtras)
	if sx.NotSeen != int64(l.lost) || len(sx.Warnings) == 0 || !strings.Contains(strings.Join(sx.Warnings, " "), "not seen") {
		t.Fatalf("stats: not_seen %d, warnings %q; want %d with a warning", sx.NotSeen, sx.Warnings, l.lost)
	}
}
