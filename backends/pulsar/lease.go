package pulsardlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
)

var (
	_ backend.Leaser       = (*Topic)(nil)
	_ backend.LeaseChecker = (*Topic)(nil)
)

// The lease is an Exclusive consumer on a subscription of its own,
// SUB-lease, on the DLQ topic (its first partition when partitioned): the
// broker admits one consumer there at a time and refuses a second at once.
// The subscription is non-durable, so it keeps no cursor and no backlog
// once its consumer leaves, and it never receives (a zero receive queue
// gives the broker no permits). The consumer's name is the holder (run ID,
// PID, host, start time), which the admin API's topic stats show to a
// refused run. When the holder dies its connection closes and the broker
// drops the consumer at once, so a resume after kill -9 is not refused.
const leaseCheckEvery = 10 * time.Second

func (t *Topic) leaseSub() string { return t.sub + "-lease" }

// leaseTopic is where the lease lives: the topic, or its first partition.
func (t *Topic) leaseTopic() topicName { return t.firstTopic() }

type leaseName struct {
	RunID string    `json:"run_id"`
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

// Lease takes the DLQ for h's run, or fails at once with a
// *backend.BusyError naming the run that holds it.
func (t *Topic) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	nb, _ := json.Marshal(leaseName{RunID: h.RunID, PID: h.PID, Host: h.Host, Since: h.Since.UTC()})
	name := string(nb)
	lt := t.leaseTopic()
	c, err := withCtx(ctx, func() (pulsar.Consumer, error) {
		return t.client.Subscribe(pulsar.ConsumerOptions{
			Topic:                   lt.String(),
			SubscriptionName:        t.leaseSub(),
			Name:                    name,
			Type:                    pulsar.Exclusive,
			SubscriptionMode:        pulsar.NonDurable,
			EnableZeroQueueConsumer: true,
		})
	}, pulsar.Consumer.Close)
	if err != nil {
		if busyErr(err) {
			holder, herr := t.LeaseHolder(ctx)
			if herr != nil || holder == "" {
				holder = "another consumer of subscription " + t.leaseSub()
			}
			return nil, &backend.BusyError{What: "DLQ " + t.String(), Holder: holder}
		}
		return nil, t.connErr(ctx, "lease (subscribe "+t.leaseSub()+")", err)
	}
	l := &pulsarLease{t: t, c: c, name: name}
	l.KeepAlive = backend.StartKeepAlive(ctx, leaseCheckEvery, 0, l.check)
	return l, nil
}

// busyErr: the broker refused a second consumer on an exclusive
// subscription.
func busyErr(err error) bool {
	var pe *pulsar.Error
	if errors.As(err, &pe) && pe.Result() == pulsar.ConsumerBusy {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "ConsumerBusy") || strings.Contains(msg, "Exclusive consumer is already connected")
}

type pulsarLease struct {
	*backend.KeepAlive
	t    *Topic
	c    pulsar.Consumer
	name string
}

// check asks, every leaseCheckEvery, whether the lease subscription's
// consumer is still this one: the client reconnects by itself after a
// broker restart, and another run may have taken the subscription in the
// gap. An admin API that is down says nothing: the consumer may well be
// fine.
func (l *pulsarLease) check(ctx context.Context) error {
	names, err := l.t.leaseConsumers(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n != l.name {
			return backend.ErrLeaseLost
		}
	}
	return nil
}

// Release closes the consumer; the broker drops the non-durable
// subscription with it.
func (l *pulsarLease) Release(ctx context.Context) error {
	l.Stop()
	l.c.Close()
	return nil
}

func (t *Topic) leaseConsumers(ctx context.Context) ([]string, error) {
	st, err := t.admin.stats(ctx, t.leaseTopic(), false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range st.Subscriptions[t.leaseSub()].Consumers {
		out = append(out, c.ConsumerName)
	}
	return out, nil
}

// LeaseHolder describes the run holding the DLQ, "" when none does.
func (t *Topic) LeaseHolder(ctx context.Context) (string, error) {
	names, err := t.leaseConsumers(ctx)
	if err != nil {
		if errors.Is(err, errAdminNotFound) {
			return "", nil // no topic yet: nobody holds it
		}
		return "", fmt.Errorf("%s: lease: %w", t, err)
	}
	for _, n := range names {
		var ln leaseName
		if json.Unmarshal([]byte(n), &ln) == nil && ln.RunID != "" {
			return backend.LeaseHolder{RunID: ln.RunID, PID: ln.PID, Host: ln.Host, Since: ln.Since}.String(), nil
		}
		return "consumer " + n + " of subscription " + t.leaseSub(), nil
	}
	return "", nil
}
