package pulsardlq

import (
	"context"
	"errors"
	"sync"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/backoff"
)

// The Go client reconnects a producer whose connection was lost and then
// writes again every message still awaiting its receipt. A message the
// broker had stored, whose receipt the lost connection swallowed, is then
// stored twice: a second copy that the caller never sent and no journal
// records (the broker drops it only where the namespace deduplicates,
// which is off by default). A redrive decides itself what to send again,
// and journals it (resume, ambiguous); an import decides it by the
// dlqctl_source_id it finds on a rerun. So their producers are never
// reconnected: a lost connection fails the send in flight at once, as an
// unknown outcome, and the next send makes a new producer.
//
// Reads, acknowledgements, the lease and the removal record keep the
// client's reconnection: a repeated read or acknowledgement changes
// nothing, and a removal recorded twice is one removal.

// errConnLost is a send whose connection to the broker was lost before its
// receipt came: the broker may have stored the message or not.
var errConnLost = errors.New("the connection to the broker was lost before the broker confirmed the send: whether it stored the message is unknown")

// onceProducer is a producer that the client never reconnects (see
// above).
type onceProducer struct {
	pulsar.Producer
	// lost is closed when the producer's connection is lost: the client
	// asks for its reconnection backoff then, and only then.
	lost <-chan struct{}
}

// createOnceProducer creates a producer with opts that the client never
// reconnects.
func (t *Topic) createOnceProducer(opts pulsar.ProducerOptions) (onceProducer, error) {
	lost := make(chan struct{})
	var once sync.Once
	never := uint(0)
	opts.MaxReconnectToBroker = &never
	opts.BackOffPolicyFunc = func() backoff.Policy {
		once.Do(func() { close(lost) })
		return backoff.NewDefaultBackoff()
	}
	p, err := t.client.CreateProducer(opts)
	if err != nil {
		return onceProducer{}, err
	}
	return onceProducer{Producer: p, lost: lost}, nil
}

// isLost says whether the producer's connection was lost: it can send no
// more.
func (p onceProducer) isLost() bool {
	select {
	case <-p.lost:
		return true
	default:
		return false
	}
}

// send sends msg and waits for its receipt. When the connection is lost
// first, it returns errConnLost at once (rather than at the send timeout).
func (p onceProducer) send(ctx context.Context, msg *pulsar.ProducerMessage) (pulsar.MessageID, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-p.lost:
			cancel(errConnLost)
		case <-sctx.Done():
		}
	}()
	id, err := p.Producer.Send(sctx, msg)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(sctx), errConnLost) {
		return nil, errConnLost
	}
	return id, err
}
