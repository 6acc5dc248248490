package pulsardlq_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// sendTimeout is the send timeout of the Topics these tests open: a send
// whose connection is lost must fail long before it.
const sendTimeout = 30 * time.Second

// TestConnectionLostMidSendIsNotSentAgain: a redrive send whose connection
// to the broker is lost before its receipt fails at once as an unknown
// outcome, and the client never writes it again on its own when it
// reconnects (a second copy that no journal records). What arrived is then
// found by the run's markers, and the origin ends with the event once.
func TestConnectionLostMidSendIsNotSentAgain(t *testing.T) {
	c := client(t)
	dlq, origin := freshTopic(t, ""), freshTopic(t, "")
	withConsumers(t, c, origin)
	deadLetters(t, c, dlq, origin, "L", 1)
	cutter := newSendCutter(t)
	tp := open(t, dlq, pulsardlq.Options{SendTimeout: sendTimeout, Logger: cutter})
	items := planItems(t, tp)
	m := runMarkers("lost-connection")
	cut := cutter.cut(t, func() error {
		_, err := tp.Publish(testCtx(t), items, m)
		return err
	})
	// The broker may have read the send from its socket after the cut (a
	// destroyed socket still gives up what it had received) and stored it,
	// its receipt lost: once at most, whatever the client does meanwhile.
	time.Sleep(2 * time.Second)
	got := eventIDs(t, c, origin)
	if len(got) > 1 {
		t.Fatalf("the origin holds %v after the cut: the send in flight was written again behind the run's back", got)
	}
	// As a resume does: what arrived is found by the run's markers, and
	// only what did not is sent again, by the run's own decision, through
	// a new producer of the same name.
	found, err := tp.CheckPublished(testCtx(t), []backend.PublishedQuery{{Item: items[0], Since: cut.Add(-time.Minute)}}, m)
	if err != nil {
		t.Fatal(err)
	}
	if (found[0] == backend.PresenceFound) != (len(got) == 1) {
		t.Fatalf("the origin holds %v and the run's markers say %v", got, found[0])
	}
	if found[0] != backend.PresenceFound {
		res, err := tp.Publish(testCtx(t), items, m)
		if err != nil || res[0].Err != nil {
			t.Fatalf("publish after the cut: %+v, %v", res, err)
		}
	}
	t.Logf("the broker stored the send before the cut: %v", found[0] == backend.PresenceFound)
	if got := eventIDs(t, c, origin); !slices.Equal(got, []string{"L-1"}) {
		t.Errorf("the origin holds %v, want L-1 once", got)
	}
}

// TestConnectionLostMidImportIsNotSentAgain: an import whose connection
// is lost before its receipt fails at once, and the client never writes
// it again on its own; the import run again finds what arrived by its
// source id, so the DLQ ends with the entry once.
func TestConnectionLostMidImportIsNotSentAgain(t *testing.T) {
	c := client(t)
	dlq := freshTopic(t, "")
	cutter := newSendCutter(t)
	tp := open(t, dlq, pulsardlq.Options{SendTimeout: sendTimeout, Logger: cutter})
	e := envelope.Envelope{ID: "src-1", EventID: "I-1", Payload: []byte(`{"n":1}`), PayloadEncoding: "json"}
	cutter.cut(t, func() error {
		_, err := tp.Import(testCtx(t), e)
		return err
	})
	time.Sleep(2 * time.Second)
	if got := eventIDs(t, c, dlq); len(got) > 1 {
		t.Fatalf("the DLQ holds %v after the cut: the import in flight was written again behind its back", got)
	}
	// Run again, as a new process: what arrived is refused as there.
	again := open(t, dlq, pulsardlq.Options{})
	if _, err := again.Import(testCtx(t), e); err != nil && !errors.Is(err, backend.ErrExists) {
		t.Fatal(err)
	}
	if got := eventIDs(t, c, dlq); !slices.Equal(got, []string{"I-1"}) {
		t.Errorf("the DLQ holds %v, want I-1 once", got)
	}
}

// sendCutter cuts the connections between this process and the test
// broker while a send waits for its receipt. It is the client logger of
// the Topic under test: the broker is frozen as soon as the client logs
// that it created a producer, so that the next thing the Topic sends is
// the send, which then waits in the broker's socket.
type sendCutter struct {
	broker int
	armed  atomic.Bool
	once   sync.Once
	frozen chan error
}

func newSendCutter(t *testing.T) *sendCutter {
	s := &sendCutter{broker: pulsarServer(t).PID(), frozen: make(chan error, 1)}
	t.Cleanup(func() { _ = testproc.Thaw(s.broker) })
	return s
}

// cut runs send, cuts its connections once its message waits in the
// frozen broker's socket, and checks that send fails at once. It returns
// the time of the cut.
func (s *sendCutter) cut(t *testing.T, send func() error) time.Time {
	t.Helper()
	done := make(chan error, 1)
	s.armed.Store(true)
	go func() { done <- send() }()
	select {
	case err := <-s.frozen:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("the send ended (%v) and the client never logged its producer's creation: this test cannot stop the broker before the send", err)
	}
	waitSent(t, s.broker)
	ends, _, err := testproc.Between(os.Getpid(), s.broker)
	if err != nil {
		t.Fatal(err)
	}
	if err := testproc.Cut(ends); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	if err := testproc.Thaw(s.broker); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(sendTimeout + 15*time.Second):
		t.Fatalf("the send in flight did not end within %s of its lost connection", sendTimeout+15*time.Second)
	}
	took := time.Since(cut)
	if err == nil {
		t.Fatal("the send in flight on the lost connection succeeded: the client sent it again on a new connection")
	}
	if took > sendTimeout/2 {
		t.Errorf("the send in flight failed %s after its connection was lost, want at once (the send timeout is %s)", took, sendTimeout)
	}
	t.Logf("the send in flight failed %s after the cut: %v", took.Round(time.Millisecond), err)
	return cut
}

// waitSent waits until the frozen broker has unread bytes from this
// process, no longer growing: the send is in its socket.
func waitSent(t *testing.T, broker int) {
	t.Helper()
	last, since := -1, time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		_, server, err := testproc.Between(os.Getpid(), broker)
		if err != nil {
			t.Fatal(err)
		}
		unread := 0
		for _, s := range server {
			unread += s.RxQueue
		}
		if unread != last {
			last, since = unread, time.Now()
		}
		if unread > 0 && time.Since(since) >= 150*time.Millisecond {
			return
		}
	}
	t.Fatal("the send never reached the broker's socket")
}

// info takes each info message of the client: the first "Created
// producer" once armed freezes the broker.
func (s *sendCutter) info(msg string) {
	if msg == "Created producer" && s.armed.Load() {
		s.once.Do(func() { s.frozen <- testproc.Freeze(s.broker) })
	}
}

// The client logger: info messages go to info, the rest nowhere.

func (s *sendCutter) SubLogger(plog.Fields) plog.Logger        { return s }
func (s *sendCutter) WithFields(plog.Fields) plog.Entry        { return s }
func (s *sendCutter) WithField(string, interface{}) plog.Entry { return s }
func (s *sendCutter) WithError(error) plog.Entry               { return s }
func (s *sendCutter) Debug(...interface{})                     {}
func (s *sendCutter) Info(args ...interface{})                 { s.info(fmt.Sprint(args...)) }
func (s *sendCutter) Warn(...interface{})                      {}
func (s *sendCutter) Error(...interface{})                     {}
func (s *sendCutter) Debugf(string, ...interface{})            {}
func (s *sendCutter) Infof(format string, args ...interface{}) { s.info(fmt.Sprintf(format, args...)) }
func (s *sendCutter) Warnf(string, ...interface{})             {}
func (s *sendCutter) Errorf(string, ...interface{})            {}
