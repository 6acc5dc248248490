package redrive

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqctl/dlqctl/backend"
)

// strategy is what a kind of run does with a batch: a redrive publishes
// each entry to its destination and reconciles the batch; a resolve
// archives each envelope in the journal and removes it.
type strategy interface {
	// move settles what a crash left open in seqs and moves the rest;
	// since is when the batch started.
	move(ctx context.Context, st *State, seqs []int64, since time.Time) error
	// report fills the batch's verdicts and gate.
	report(ctx context.Context, st *State, seqs []int64, watermark string, rep *BatchReport) error
}

func strategyFor(e *Engine, kind string) strategy {
	if kind == KindResolve {
		return resolveStrategy{e}
	}
	return redriveStrategy{e}
}

type redriveStrategy struct{ e *Engine }

func (s redriveStrategy) move(ctx context.Context, st *State, seqs []int64, since time.Time) error {
	return s.e.moveChunks(ctx, st, seqs, since)
}

func (s redriveStrategy) report(ctx context.Context, st *State, seqs []int64, watermark string, rep *BatchReport) error {
	return s.e.reconcile(ctx, st, seqs, watermark, rep)
}

type resolveStrategy struct{ e *Engine }

func (s resolveStrategy) move(ctx context.Context, st *State, seqs []int64, _ time.Time) error {
	return s.e.resolveChunks(ctx, st, seqs)
}

// report: a resolve has no consumer to reconcile with; its gate passes.
func (s resolveStrategy) report(_ context.Context, st *State, seqs []int64, _ string, rep *BatchReport) error {
	rep.Verdicts = map[string]int{}
	for _, seq := range seqs {
		if st.Step(seq) == RecRemoved {
			rep.Moved++
		}
	}
	rep.Gate = GatePass
	return nil
}

// batchSize follows the ramp. The ramp counts consecutive passed batches:
// after a failed gate (a run resumed --past-gate) it starts again at its
// first size. Without effects it never passes the first size unless the
// plan says unverified is fine.
func (e *Engine) batchSize(st *State) int {
	ramp := st.Plan.Params.Ramp
	if len(ramp) == 0 {
		ramp = []int{10}
	}
	i := 0
	for j := len(st.Batches) - 1; j >= 0 && st.Batches[j].Passed(); j-- {
		i++
	}
	if e.Probe == nil && !st.Plan.Params.UnverifiedOK {
		i = 0
	}
	if i >= len(ramp) {
		i = len(ramp) - 1
	}
	return ramp[i]
}

// chunkSize is how many moves share one journal sync: the burst under a
// rate limit (so the limiter's accuracy holds), 256 when unlimited or
// what the mover asks for (backend.ChunkSizer).
func (e *Engine) chunkSize() int {
	if e.Chunk > 0 {
		return e.Chunk
	}
	if e.Limiter == nil || e.Limiter.Limit() == rate.Inf {
		if c, ok := e.Mover.(backend.ChunkSizer); ok && c.UnlimitedChunk() > 0 {
			return c.UnlimitedChunk()
		}
		return 256
	}
	if b := e.Limiter.Burst(); b > 0 {
		return b
	}
	return 1
}
