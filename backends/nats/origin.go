package natsdlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
)

var _ backend.OriginChecker = (*Stream)(nil)

// CheckOrigin: a redrive publishes to the original subject, which a
// stream must take, or the publish has nobody to store it
// (backend.OriginChecker). A stream that acknowledges a publish before it
// writes it passes, with what a crash can lose said.
func (s *Stream) CheckOrigin(ctx context.Context, subject string, _ []string) backend.OriginStatus {
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	name, err := s.js.StreamNameBySubject(rctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return backend.OriginStatus{Detail: fmt.Sprintf("no stream takes the subject %q", subject),
			Fix: fmt.Sprintf("add %q to a stream's subjects, or redrive with --to", subject)}
	case err != nil:
		return backend.OriginStatus{Detail: s.wrap("find the stream of "+subject, err).Error(), Fix: "check the server and the credentials"}
	case name == s.src.stream:
		return backend.OriginStatus{Detail: fmt.Sprintf("%q is bound to the DLQ stream itself", subject),
			Fix: "redrive to the original subject with --to"}
	}
	detail := "bound to stream " + name
	if st, err := s.js.Stream(rctx, name); err == nil {
		if lost := lostOnCrash(st.CachedInfo().Config); lost != "" {
			detail += "; " + lost + ": a crash of the server can lose a redrive it acknowledged, once its entry has left the DLQ"
		}
	}
	return backend.OriginStatus{OK: true, Detail: detail}
}
