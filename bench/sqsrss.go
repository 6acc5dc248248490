package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
)

const (
	// targetSQSRSSKiB: peak RSS of `dlqctl stats` over an SQS DLQ of
	// SQSN messages, at most.
	targetSQSRSSKiB = 64 << 10
	// targetSQSRSSFlat: peak RSS at SQSN ÷ at SQSN/10, at most.
	targetSQSRSSFlat = 1.5
)

// SQSRSSPoint is one size of the sqs-rss case: the peak RSS of one
// `dlqctl stats` process over an SQS DLQ of N messages.
type SQSRSSPoint struct {
	N      int
	Total  int
	MaxRSS int64 // KiB
	Anon   int64 // KiB
	Wall   time.Duration
}

// runSQSRSS is the sqs-rss case: `dlqctl stats` over SQSN/10 and SQSN
// messages on ElasticMQ, each in its own process, for its peak RSS (a
// scan keeps only order keys, file offsets and receipt handles in memory).
func (c Config) runSQSRSS(ctx context.Context, d *dlqctl, now time.Time, res *Results) error {
	sqsServerEnv()
	withCreds := *d
	withCreds.env = append(slices.Clone(d.env), sqstest.Env()...)
	d = &withCreds
	c.logf("sqs-rss: starting ElasticMQ")
	s, err := sqstest.StartProcess()
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Stop(); err != nil {
			c.logf("sqs-rss: %v", err)
		}
	}()
	client := s.Client()
	for _, size := range []int{c.SQSN / 10, c.SQSN} {
		name := fmt.Sprintf("bench-rss-%d-%d", time.Now().UnixNano(), size)
		q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			return err
		}
		url := aws.ToString(q.QueueUrl)
		c.logf("sqs-rss: sending %d messages to %s", size, name)
		st := time.Now()
		if err := seedSQS(ctx, client, url, size, now); err != nil {
			return fmt.Errorf("seed: %v", err)
		}
		c.logf("sqs-rss: seeded in %s", time.Since(st).Round(time.Millisecond))
		p, err := d.runProcess(ctx, fmt.Sprintf("sqs://%s?region=%s&endpoint=%s&receivers=%d", name, sqstest.Region, s.Endpoint(), sqsReceivers))
		if err != nil {
			return err
		}
		if _, err := lostToDroppedAnswers(ctx, client, url, size, p.Total); err != nil {
			return fmt.Errorf("dlqctl stats read %d messages, want %d: %v", p.Total, size, err)
		}
		res.SQSRSS = append(res.SQSRSS, SQSRSSPoint{N: size, Total: p.Total, MaxRSS: p.MaxRSS, Anon: p.Anon, Wall: p.Wall})
		c.logf("sqs-rss: N=%d peak RSS %.1f MiB, %s", size, mib(p.MaxRSS), p.Wall.Round(time.Millisecond))
		if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			return err
		}
	}
	return nil
}

func (res *Results) writeSQSRSS(w io.Writer) {
	fmt.Fprintf(w, "\n### sqs-rss — peak memory of `dlqctl stats` over an SQS DLQ (ElasticMQ), one process per size\n\n")
	fmt.Fprintln(w, "| N | seen | peak RSS (ru_maxrss) MiB | peak RssAnon MiB | wall s |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for _, p := range res.SQSRSS {
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f |\n", group(float64(p.N)), group(float64(p.Total)), mib(p.MaxRSS), mib(p.Anon), p.Wall.Seconds())
	}
	if len(res.SQSRSS) < 2 {
		return
	}
	small, large := res.SQSRSS[0], res.SQSRSS[len(res.SQSRSS)-1]
	growth := float64(large.MaxRSS) / float64(small.MaxRSS)
	fmt.Fprintf(w, "\nTarget: peak RSS at %s ≤ %.0f MiB — %s (%.1f MiB); at most %.1f× the peak at %s — %s (%.2f×).\n",
		group(float64(large.N)), mib(targetSQSRSSKiB), verdict(large.MaxRSS <= targetSQSRSSKiB), mib(large.MaxRSS),
		targetSQSRSSFlat, group(float64(small.N)), verdict(growth <= targetSQSRSSFlat), growth)
}
