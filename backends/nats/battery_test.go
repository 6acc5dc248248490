package natsdlq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
)

// readOnlyRounds is how many times each read-only command runs.
const readOnlyRounds = 30

// readOnly runs every read-only command on source readOnlyRounds times;
// id is an entry for show.
func readOnly(t *testing.T, source, id string) {
	t.Helper()
	cmds := [][]string{
		{"stats", "-o", "json"},
		{"list", "-o", "json"},
		{"show", id, "-o", "json"},
		{"sample", "--per-category", "5"},
		{"check", "--max-total", "1000"},
		{"categorize", "--discover"},
	}
	for round := range readOnlyRounds {
		for _, c := range cmds {
			if code, out := dlqctl(t, append([]string{"--source", source}, c...)...); code != 0 {
				t.Fatalf("round %d: %s: exit %d\n%s", round, c[0], code, out)
			}
		}
	}
}

// brokerState is what a read must leave as it was: every stream's state
// and every consumer's, by name.
func brokerState(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	streams := js.ListStreams(ctx)
	for in := range streams.Info() {
		st := in.State
		out["stream "+in.Config.Name] = fmt.Sprintf("msgs %d bytes %d seq %d-%d deleted %d consumers %d", st.Msgs, st.Bytes, st.FirstSeq, st.LastSeq, st.NumDeleted, st.Consumers)
		stream, err := js.Stream(ctx, in.Config.Name)
		if err != nil {
			t.Fatal(err)
		}
		cons := stream.ListConsumers(ctx)
		for ci := range cons.Info() {
			out["consumer "+in.Config.Name+"/"+ci.Name] = fmt.Sprintf("delivered %d/%d ack floor %d/%d ack pending %d redelivered %d pending %d",
				ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream, ci.NumAckPending, ci.NumRedelivered, ci.NumPending)
		}
		if err := cons.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := streams.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameState(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: was %q, now %q", k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s is new: %q", k, v)
		}
	}
}

// TestReadOnlyCommandsChangeNothing: thirty rounds of stats, list, show,
// sample, check and categorize --discover leave every stream and consumer
// as they were: counts, sequences, consumers (a scan's ephemeral consumer
// included), and in advisory shape the origin consumer's delivery state
// and each original's delivery count, read afterwards by delivering it.
func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()

	t.Run("copies", func(t *testing.T) {
		base := fmt.Sprintf("ro%d", time.Now().UnixNano())
		dlq := base + "_DLQ"
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			h := nats.Header{"event_id": {fmt.Sprintf("E%d", i)}, natsdlq.HeaderOriginalSubject: {base + ".orders"}, "last_error": {fmt.Sprintf("timeout after %d ms", i*100)}}
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "dlq." + dlq + ".x", Header: h, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		before := brokerState(t, js)
		readOnly(t, srv.URL()+"?stream="+dlq, "3")
		sameState(t, before, brokerState(t, js))
	})

	t.Run("advisories", func(t *testing.T) {
		fx := newTermFixture(t, srv, js)
		for i := 1; i <= 3; i++ {
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: fx.subj, Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("E%d", i)}}, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		// E1 is terminated (an entry); E2 is delivered and naked once;
		// E3 is not delivered yet.
		batch, err := fx.cons.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if m.Headers().Get(nats.MsgIdHdr) == "E1" {
				_ = m.TermWithReason("schema invalid")
			} else {
				_ = m.Nak()
			}
		}
		fx.advisories(t, 1)
		before := brokerState(t, js)
		readOnly(t, fx.source, "1")
		sameState(t, before, brokerState(t, js))
		delivered := map[string]uint64{}
		for deadline := time.Now().Add(10 * time.Second); len(delivered) < 2 && time.Now().Before(deadline); {
			batch, err := fx.cons.Fetch(2, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range batch.Messages() {
				md, _ := m.Metadata()
				delivered[m.Headers().Get(nats.MsgIdHdr)] = md.NumDelivered
				_ = m.Ack()
			}
		}
		if fmt.Sprint(delivered) != "map[E2:2 E3:1]" {
			t.Errorf("delivery counts after the reads: %v, want E2 delivered a second time and E3 a first", delivered)
		}
		if _, err := fx.origin.GetMsg(ctx, 1); err != nil {
			t.Errorf("the terminated original: %v", err)
		}
		if !strings.HasPrefix(fx.source, srv.URL()) {
			t.Fatal(fx.source)
		}
	})
}
