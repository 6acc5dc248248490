package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// processTimeout bounds the work on one received message. That work runs
// on a context that a shutdown signal does not cancel: SIGTERM stops
// receiving, and the message in hand is committed and acked first.
const processTimeout = 30 * time.Second

// tally counts messages by outcome, for the summary on stdout.
type tally map[string]int

// run consumes until --until-idle, --max, a signal (ctx) or an error.
func run(ctx context.Context, opts Options, stdout, stderr io.Writer) error {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.FailError == "" {
		opts.FailError = defaultFailError
	}
	if opts.Create {
		return create(ctx, opts, stdout)
	}
	src, err := openSource(ctx, opts, stderr)
	if err != nil {
		return err
	}
	defer src.Close()
	store, err := openStore(ctx, opts.Inbox, len(opts.CrashAfterCommit) > 0)
	if err != nil {
		return err
	}
	defer store.Close()
	if opts.Ready != "" {
		if err := os.WriteFile(opts.Ready, nil, 0o644); err != nil {
			return fmt.Errorf("--ready: %w", err)
		}
	}

	w := &worker{opts: opts, store: store, log: stderr}
	counts := tally{}
	n := 0
	lastMessage := opts.Now()
	for opts.Max == 0 || n < opts.Max {
		m, rc, err := src.Next(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return summary(stdout, n, counts) // SIGINT/SIGTERM: stop receiving
		case errors.Is(err, errIdle):
			if opts.UntilIdle > 0 && opts.Now().Sub(lastMessage) >= opts.UntilIdle {
				return summary(stdout, n, counts)
			}
			continue
		case err != nil:
			return err
		}
		n++
		lastMessage = opts.Now()
		outcome, err := w.handle(context.WithoutCancel(ctx), m, rc)
		counts[outcome]++
		if err != nil {
			return err
		}
	}
	return summary(stdout, n, counts)
}

func summary(stdout io.Writer, n int, c tally) error {
	_, err := fmt.Fprintf(stdout, "processed=%d applied=%d absorbed=%d conflict=%d failed=%d\n",
		n, c[outcomeApplied], c[outcomeAbsorbed], c[outcomeConflict], c[outcomeFailed])
	return err
}

type worker struct {
	opts  Options
	store Store
	log   io.Writer
}

// handle processes one message: the transaction, then, only once it has
// committed, the ack (or the dead-letter, which acks).
func (w *worker) handle(ctx context.Context, m Message, rc Receipt) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()
	e := m.Envelope
	now := w.opts.Now()
	if e.Malformed != "" {
		// No event ID to deduplicate on, so nothing to record: straight to
		// the DLQ, where dlqctl lists it as malformed.
		w.logLine("event_id", e.EventID, "id", m.ID, "outcome", outcomeFailed, "reason", "malformed")
		dl := DeadLetter{LastError: "worker: malformed message: " + e.Malformed, Attempts: 1, At: now}
		if err := rc.DeadLetter(ctx, dl); err != nil {
			return outcomeFailed, err
		}
		return outcomeFailed, nil
	}
	d := Delivery{
		EventID:          e.EventID,
		Fingerprint:      e.Fingerprint, // carried, else sha256 of the payload
		Fail:             w.opts.Fail[e.EventID],
		DoubleEffect:     w.opts.DoubleEffect[e.EventID],
		CrashAfterCommit: w.opts.CrashAfterCommit[e.EventID],
	}
	r, err := w.store.Process(ctx, d, now)
	if err != nil {
		// Nothing committed and nothing acked: the message is delivered
		// again after a restart.
		return "", fmt.Errorf("event %s (%s): %w", e.EventID, m.ID, err)
	}
	kv := []string{"event_id", e.EventID, "attempts", strconv.FormatInt(r.Attempts, 10),
		"effects", strconv.FormatInt(r.Effects, 10), "outcome", r.Outcome, "id", m.ID}
	if r.Crash {
		w.logLine(append(kv, "crash", "after-commit")...)
		return r.Outcome, errCrash
	}
	w.logLine(kv...)
	if r.Outcome == outcomeFailed {
		dl := DeadLetter{LastError: w.opts.FailError, Attempts: r.Attempts, At: now}
		return r.Outcome, rc.DeadLetter(ctx, dl)
	}
	// A conflict is acked too: it is recorded, and redelivering it would
	// change nothing. dlqctl's reconcile reports it.
	return r.Outcome, rc.Ack(ctx)
}

// logLine writes key=value pairs on one line, values quoted when they
// need it. Never the payload: it may hold personal data.
func (w *worker) logLine(kv ...string) {
	if !w.opts.Log {
		return
	}
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		v := kv[i+1]
		if v == "" || strings.ContainsAny(v, " \"=\t\n\\") || !strconv.CanBackquote(v) {
			v = strconv.Quote(v)
		}
		b.WriteString(kv[i] + "=" + v)
	}
	b.WriteByte('\n')
	io.WriteString(w.log, b.String())
}
