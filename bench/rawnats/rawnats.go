// Package rawnats is the bench's raw nats.go loops, what dlqctl's NATS
// JetStream backend is measured against: the least work that does the
// same job with the same client.
package rawnats

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Scan reads every message of stream through an ordered consumer (no
// acks, as dlqctl reads), decodes each body as JSON, hashes it (SHA-256)
// and reads the event_id and last_error headers. It returns how many it
// read.
func Scan(ctx context.Context, js jetstream.JetStream, stream string) (int, error) {
	_, total, it, err := readAll(ctx, js, stream)
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	n, hdr := 0, 0
	for n < total {
		m, err := it.Next()
		if err != nil {
			return n, err
		}
		var v map[string]any
		_ = json.Unmarshal(m.Data(), &v)
		_ = sha256.Sum256(m.Data())
		hdr += len(m.Headers().Get("event_id")) + len(m.Headers().Get("last_error"))
		n++
	}
	return n, nil
}

// Redrive moves every message of stream to the subject its subjectHeader
// names, one after another: publish with its headers and a Nats-Msg-Id of
// its own, wait for the stream's ack, then delete it by sequence. It
// returns how many it moved.
func Redrive(ctx context.Context, js jetstream.JetStream, stream, subjectHeader string) (int, error) {
	st, total, it, err := readAll(ctx, js, stream)
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	moved := 0
	for moved < total {
		m, err := it.Next()
		if err != nil {
			return moved, err
		}
		md, err := m.Metadata()
		if err != nil {
			return moved, err
		}
		h := nats.Header{}
		for k, vs := range m.Headers() {
			h[k] = vs
		}
		h.Set(nats.MsgIdHdr, fmt.Sprintf("raw-%s-%d", stream, md.Sequence.Stream))
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.Headers().Get(subjectHeader), Header: h, Data: m.Data()}); err != nil {
			return moved, err
		}
		if err := st.DeleteMsg(ctx, md.Sequence.Stream); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, nil
}

// readAll opens an ordered consumer over every message of stream, as
// many as it holds now.
func readAll(ctx context.Context, js jetstream.JetStream, stream string) (jetstream.Stream, int, jetstream.MessagesContext, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, 0, nil, err
	}
	in, err := st.Info(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	oc, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, 0, nil, err
	}
	it, err := oc.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return nil, 0, nil, err
	}
	return st, int(in.State.Msgs), it, nil
}
