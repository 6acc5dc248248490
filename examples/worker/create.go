package main

import (
	"context"
	"io"
	"strings"
)

// create makes what a rehearsal needs and the broker does not make by
// itself: a Kafka origin topic and its DLT, or an SQS queue whose redrive
// policy dead-letters into its DLQ. What exists already is left as it is
// (an SQS queue gets the redrive policy).
func create(ctx context.Context, opts Options, stdout io.Writer) error {
	if strings.HasPrefix(opts.Source, "kafka://") {
		return createKafka(ctx, opts.Source, opts.DLQ, stdout)
	}
	return createSQS(ctx, opts.Source, opts.DLQ, opts.MaxDeliveries, stdout)
}
