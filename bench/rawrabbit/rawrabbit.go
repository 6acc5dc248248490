// Package rawrabbit is the bench's raw amqp091-go loops, what dlqctl's
// RabbitMQ backend is measured against: the least work that does the same
// job with the same client.
package rawrabbit

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ScanAndReturn consumes every message of queue with manual
// acknowledgement and unlimited prefetch, decodes each body as JSON and
// hashes it (SHA-256), reads the x-death header, and gives every message
// back by closing the channel. It returns how many it read.
func ScanAndReturn(ctx context.Context, url, queue string) (int, error) {
	c, err := amqp.Dial(url)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return 0, err
	}
	st, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for n < st.Messages {
		select {
		case d, ok := <-ds:
			if !ok {
				return n, fmt.Errorf("channel closed after %d messages", n)
			}
			var v map[string]any
			_ = json.Unmarshal(d.Body, &v)
			_ = sha256.Sum256(d.Body)
			if xd, ok := d.Headers["x-death"].([]any); ok && len(xd) > 0 {
				_, _ = xd[0].(amqp.Table)
			}
			n++
		case <-time.After(5 * time.Second):
			return n, fmt.Errorf("no message for 5 s after %d of %d", n, st.Messages)
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return n, ch.Close()
}

// Redrive moves every message of dlq to the queue its
// x-first-death-queue header names, chunk messages at a time: consume a
// chunk, publish each with mandatory on a confirm channel, wait for every
// confirm, ack the chunk. It returns how many it moved.
func Redrive(ctx context.Context, url, dlq string, chunk int) (int, error) {
	c, err := amqp.Dial(url)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	in, err := c.Channel()
	if err != nil {
		return 0, err
	}
	out, err := c.Channel()
	if err != nil {
		return 0, err
	}
	if err := out.Confirm(false); err != nil {
		return 0, err
	}
	returns := out.NotifyReturn(make(chan amqp.Return, chunk))
	st, err := in.QueueDeclarePassive(dlq, false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	if err := in.Qos(chunk, 0, false); err != nil {
		return 0, err
	}
	ds, err := in.Consume(dlq, "", false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	moved := 0
	for moved < st.Messages {
		batch := make([]amqp.Delivery, 0, chunk)
		for len(batch) < chunk && moved+len(batch) < st.Messages {
			select {
			case d := <-ds:
				batch = append(batch, d)
			case <-time.After(5 * time.Second):
				return moved, fmt.Errorf("no message for 5 s after %d", moved+len(batch))
			}
		}
		confirms := make([]*amqp.DeferredConfirmation, len(batch))
		for i, d := range batch {
			dest, _ := d.Headers["x-first-death-queue"].(string)
			h := amqp.Table{}
			for k, v := range d.Headers {
				h[k] = v
			}
			delete(h, "x-death")
			if confirms[i], err = out.PublishWithDeferredConfirmWithContext(ctx, "", dest, true, false, amqp.Publishing{
				Headers: h, ContentType: d.ContentType, DeliveryMode: d.DeliveryMode, MessageId: d.MessageId,
				Timestamp: d.Timestamp, Body: d.Body,
			}); err != nil {
				return moved, err
			}
		}
		for _, dc := range confirms {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return moved, fmt.Errorf("confirm: %v %v", ok, err)
			}
		}
		select {
		case r := <-returns:
			return moved, fmt.Errorf("returned: %s", r.ReplyText)
		default:
		}
		if err := in.Ack(batch[len(batch)-1].DeliveryTag, true); err != nil {
			return moved, err
		}
		moved += len(batch)
	}
	return moved, in.Close()
}
