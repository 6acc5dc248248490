// Command worker is the reference idempotent consumer that dlqctl
// reconciles against: it reads a Redis stream through a consumer group, a
// Kafka topic through a consumer group, read_committed (dead-lettering as
// Spring Kafka does, see kafka.go), a Pulsar topic through a Shared subscription (dead-lettering through the
// client's DLQPolicy, see pulsar.go), an SQS queue (dead-lettering through
// the queue's redrive policy, see sqs.go), a RabbitMQ queue (dead-lettering
// through its dead-letter exchange, see rabbitmq.go), a NATS JetStream
// stream through a durable pull consumer (see nats.go), or a directory
// queue's inbox (see dir.go), records every delivery in an inbox table and
// applies the business effect in the same database transaction, and acks
// only after that transaction has committed. docs/consumer-contract.md says
// what a team copies from it.
//
// Each backend's mode is one file: a Source that delivers a Message and a
// Receipt the loop (worker.go) acks or dead-letters by, and a mode entry
// listed in modes (source.go).
//
// The --fail, --double-effect and --crash-after-commit flags inject the
// faults that dlqctl's end-to-end tests must detect; a real consumer has
// none of them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitCrash is the injected crash between commit and ack.
	exitCrash = 3
)

// defaultFailError is the last_error of an event failed with --fail.
const defaultFailError = "worker: injected failure"

// Options is everything the worker is told on the command line.
type Options struct {
	Source string // a URL one of the modes takes (see modes), or dir:PATH
	DLQ    string // redis: the DLQ stream key ("" means <origin>-dlq); pulsar: the DLQ topic ("" means <origin>-<sub>-DLQ)
	Inbox  string // sqlite:PATH or postgres://…

	// Pulsar; some also for nats, sqs and rabbitmq (see their flags).
	MaxDeliveries   int           // deliveries before the client dead-letters
	RedeliveryDelay time.Duration // nack (or retry) redelivery delay
	Retry           bool          // use the client's retry topic (carries last_error)

	Fail             eventSet // processing fails: dead-lettered
	FailError        string   // last_error of those
	DoubleEffect     eventSet // the effect is applied twice
	CrashAfterCommit eventSet // exit 3 after commit, before ack, once

	UntilIdle time.Duration // exit after this long without a message; 0: never
	Max       int           // stop after this many messages; 0: no limit
	Log       bool          // one line per message on stderr
	// Ready is a file created once the source and the inbox are open
	// (consumer group, subscription and tables made): a script or test
	// waits for it rather than guessing how long start-up takes.
	Ready string

	// Create makes the origin and its DLQ (kafka: the topic and its DLT;
	// sqs: the queue and its DLQ, with a redrive policy; rabbitmq: the
	// queue, its dead-letter exchange and the DLQ; nats: the stream and
	// its copy stream) and exits.
	Create bool

	// Now is the clock (dead_lettered_at, applied_at, DLQ file names).
	Now func() time.Time
}

// eventSet is a repeatable --flag EVENT_ID.
type eventSet map[string]bool

func (s eventSet) String() string {
	ids := make([]string, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	return strings.Join(ids, ",")
}

func (s eventSet) Set(id string) error {
	if id == "" {
		return errors.New("want an event ID")
	}
	s[id] = true
	return nil
}

// errCrash is returned by run for --crash-after-commit; main exits 3.
var errCrash = errors.New("crash after commit (injected): the message is left unacked")

// usageError is a flag or URL that is wrong as written.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainCode(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func mainCode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return exitUsage
	}
	err = run(ctx, opts, stdout, stderr)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errCrash):
		fmt.Fprintln(stderr, "worker:", err)
		return exitCrash
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "worker:", err)
		return exitUsage
	}
	fmt.Fprintln(stderr, "worker:", err)
	return exitError
}

func parseFlags(args []string, stderr io.Writer) (Options, error) {
	opts := Options{
		Fail:             eventSet{},
		DoubleEffect:     eventSet{},
		CrashAfterCommit: eventSet{},
		Now:              time.Now,
		MaxDeliveries:    3,
		RedeliveryDelay:  100 * time.Millisecond,
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.Source, "source", "", "`URL` to consume: "+sourceForms(func(m mode) string { return m.help }))
	fs.StringVar(&opts.DLQ, "dlq", "", "redis: the DLQ stream `KEY` on the same server (default ORIGIN-dlq); nats: the copy stream (default ORIGIN_DLQ); kafka: the DLT (default ORIGIN.DLT); pulsar: the DLQ topic (default ORIGIN-SUB-DLQ); sqs, rabbitmq (with --create): the DLQ (default QUEUE-dlq); dir: ignored, always PATH/error")
	fs.IntVar(&opts.MaxDeliveries, "max-deliveries", opts.MaxDeliveries, "pulsar: deliveries (or retries, with --retry) before the client dead-letters a message; nats (deadletter=nak): the consumer's MaxDeliver; sqs, rabbitmq (requeue=1) with --create: deliveries before the queue dead-letters")
	fs.DurationVar(&opts.RedeliveryDelay, "redelivery-delay", opts.RedeliveryDelay, "pulsar, nats: delay before a nacked (or retried) message is delivered again")
	fs.BoolVar(&opts.Retry, "retry", false, "pulsar: fail through the client's retry topic (ReconsumeLater), so dead letters carry last_error")
	fs.StringVar(&opts.Inbox, "inbox", "", "effect store `URL`: sqlite:PATH or postgres://…")
	fs.Var(opts.Fail, "fail", "test: processing of `EVENT_ID` fails and it is dead-lettered (pulsar: nacked, dead-lettered by the client) (repeatable)")
	fs.StringVar(&opts.FailError, "fail-error", defaultFailError, "test: the last_error `TEXT` of the events failed with --fail (pulsar: only with --retry)")
	fs.Var(opts.DoubleEffect, "double-effect", "test: apply the effect of `EVENT_ID` twice (repeatable)")
	fs.Var(opts.CrashAfterCommit, "crash-after-commit", "test: exit 3 after committing `EVENT_ID`, before the ack; once (repeatable)")
	fs.DurationVar(&opts.UntilIdle, "until-idle", 0, "exit 0 after this long without a message (0: run until SIGINT/SIGTERM)")
	fs.IntVar(&opts.Max, "max", 0, "stop after N messages (0: no limit)")
	fs.StringVar(&opts.Ready, "ready", "", "create `FILE` once the source and the inbox are open, before the first message is read")
	fs.BoolVar(&opts.Create, "create", false, "create the origin and its DLQ when they do not exist, then exit; no --inbox needed. kafka: the topic, 3 partitions, and its DLT; sqs: the queue, and its DLQ (--dlq, default QUEUE-dlq) in its redrive policy with maxReceiveCount --max-deliveries; rabbitmq: the DLQ (--dlq, default QUEUE-dlq, classic), its fanout exchange DLQ.dlx, and the queue dead-lettering through it (with requeue=1 a quorum queue that dead-letters after --max-deliveries deliveries); nats: the stream, taking subject= (default: the stream's name), and in copy mode its copy stream (--dlq, default ORIGIN_DLQ, taking dlq.DLQ.>)")
	fs.BoolVar(&opts.Log, "log", false, "one line per message on stderr (event_id, attempts, effects, outcome; never the payload)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: worker --source URL --inbox URL [flags]

The reference idempotent consumer: each message is recorded in the inbox
table and its effect applied in one transaction; the ack follows the commit.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	switch {
	case fs.NArg() > 0:
		return opts, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case opts.Source == "":
		return opts, fmt.Errorf("--source is required (%s)", sourceForms(mode.short))
	case opts.Create:
		if m, ok := modeOf(opts.Source); !ok || m.create == nil {
			return opts, fmt.Errorf("--create: only for %s sources", createForms())
		}
	case opts.Inbox == "":
		return opts, errors.New("--inbox is required (sqlite:PATH or postgres://…)")
	case opts.UntilIdle < 0:
		return opts, errors.New("--until-idle: want a duration ≥ 0")
	case opts.Max < 0:
		return opts, errors.New("--max: want N ≥ 0")
	case opts.MaxDeliveries < 1:
		return opts, errors.New("--max-deliveries: want N ≥ 1")
	case opts.RedeliveryDelay <= 0:
		return opts, errors.New("--redelivery-delay: want a duration > 0")
	}
	return opts, nil
}
