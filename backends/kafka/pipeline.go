package kafkadlq

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Decoding a record into an envelope costs more CPU than reading it off
// the wire, so a scan decodes on other cores while it merges: the merge
// runs in its own goroutine and hands out batches of records in merged
// order, a few decoders turn each batch into envelopes, and the caller's
// goroutine takes the batches back in the same order and calls fn. Order
// is that of scanRecords; only the decoding happens elsewhere.
const (
	decodeBatch = 256 // records per batch: amortises the channel hand-offs
	// decodeAhead is how many batches may be merged before fn has taken
	// them: it bounds the memory a scan holds beyond scanRecords' buffers.
	decodeAhead = 16
	maxDecoders = 4
)

// decodeJob is one batch: its records, then (once done is closed) their
// envelopes.
type decodeJob struct {
	recs []*kgo.Record
	out  []envelope.Envelope
	done chan struct{}
}

// jobSlices are the two slices of a decodeJob, for the next one.
type jobSlices struct {
	recs []*kgo.Record
	out  []envelope.Envelope
}

// scanDecoded is scanRecords with each record decoded (lean: without
// properties, see ScanLean), calling fn in the caller's goroutine in
// merged order. fn may return backend.ErrStop.
func (t *Topic) scanDecoded(ctx context.Context, c cursor, st state, lean bool, fn func(envelope.Envelope) error) error {
	decode := t.dec.Decode
	if lean {
		decode = t.dec.Lean
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := min(max(runtime.GOMAXPROCS(0), 1), maxDecoders)
	pp := &decodePipe{
		ctx:     ctx,
		cancel:  cancel,
		work:    make(chan *decodeJob, decodeAhead),
		ordered: make(chan *decodeJob, decodeAhead),
		// Batches' slices go round rather than to the collector: a batch of
		// envelopes is 100 KiB, and allocating one per 256 records was most
		// of what a lean scan allocated.
		spare: make(chan jobSlices, 2*decodeAhead+workers),
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pp.decodeJobs(decode)
		}()
	}
	mergeErr := make(chan error, 1)
	go func() { mergeErr <- pp.merge(t, c, st) }()
	fnErr := pp.deliver(fn)
	merr := <-mergeErr
	wg.Wait()
	switch {
	case errors.Is(fnErr, backend.ErrStop):
		return nil
	case fnErr != nil:
		return fnErr
	case errors.Is(merr, errStopped):
		// Only a cancelled ctx stops sends when fn did not stop.
		return context.Cause(ctx)
	}
	return merr
}

// errStopped: fn stopped the scan, so the merge gives up quietly.
var errStopped = errors.New("scan stopped")

// decodePipe is one scanDecoded: the batches in merge order (ordered),
// the same batches for the decoders (work), and slices to reuse (spare).
type decodePipe struct {
	ctx           context.Context
	cancel        context.CancelFunc
	work, ordered chan *decodeJob
	spare         chan jobSlices
}

// decodeJobs is one decoder: it decodes the batches of work until the
// merge closes it.
func (pp *decodePipe) decodeJobs(decode func(KafkaRecord) envelope.Envelope) {
	for j := range pp.work {
		j.out = j.out[:0]
		for _, r := range j.recs {
			j.out = append(j.out, decode(toKafkaRecord(r)))
		}
		clear(j.recs)
		close(j.done)
	}
}

// merge runs scanRecords and hands its records out in batches, then
// closes both channels.
func (pp *decodePipe) merge(t *Topic, c cursor, st state) error {
	defer close(pp.ordered)
	defer close(pp.work)
	var batch []*kgo.Record
	var out []envelope.Envelope
	send := func() error {
		if err := t.rebuildShare(pp.ctx, batch); err != nil {
			return err
		}
		j := &decodeJob{recs: batch, out: out, done: make(chan struct{})}
		batch, out = nil, nil
		// ordered first: a job is taken back only in merge order, and
		// a worker can only finish what the consumer will wait for.
		for _, ch := range []chan *decodeJob{pp.ordered, pp.work} {
			select {
			case ch <- j:
			case <-pp.ctx.Done():
				return errStopped
			}
		}
		return nil
	}
	err := t.scanRecords(pp.ctx, c, st, func(r *kgo.Record) error {
		if batch == nil {
			select {
			case sl := <-pp.spare:
				batch, out = sl.recs[:0], sl.out
			default:
				batch = make([]*kgo.Record, 0, decodeBatch)
				out = make([]envelope.Envelope, 0, decodeBatch)
			}
		}
		batch = append(batch, r)
		if len(batch) == decodeBatch {
			return send()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = send()
	}
	return err
}

// deliver takes the batches back in merge order, waits for each to be
// decoded and calls fn on its envelopes; after fn's first error (which it
// returns) it cancels the scan and drains, so the merge can end.
func (pp *decodePipe) deliver(fn func(envelope.Envelope) error) error {
	var fnErr error
	for j := range pp.ordered {
		if fnErr != nil {
			continue // drain, so the merge goroutine can end
		}
		select {
		case <-j.done:
		case <-pp.ctx.Done():
			fnErr = pp.ctx.Err()
			pp.cancel()
			continue
		}
		for _, e := range j.out {
			if err := fn(e); err != nil {
				fnErr = err
				pp.cancel()
				break
			}
		}
		// fn had copies: the slices can take the next batch. Cleared, so
		// that no spare holds a record's strings or payload.
		clear(j.out)
		select {
		case pp.spare <- jobSlices{recs: j.recs, out: j.out[:0]}:
		default:
		}
	}
	return fnErr
}
