package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
)

// dlq init for RabbitMQ: a stream DLQ for an origin queue.
//
//	amqp://…/VHOST?queue=ORIGIN[&admin=HTTPURL][&dlq=NAME][&dlx=EXCHANGE][&dlx_routing_key=KEY]
//
// The origin's dead letters go where its dead-letter exchange routes them
// (x-dead-letter-exchange, argument or policy; the argument wins, as the
// broker has it). dlq init reads that exchange and the dead-letter routing
// key through the management API, or takes them from dlx= and
// dlx_routing_key= (which win), declares the stream NAME (default
// ORIGIN.dlq-stream, x-queue-type stream, no retention of its own) and
// binds it to the exchange: with the dead-letter routing key when one is
// set; else, on a topic exchange, with #; on a fanout, with none needed;
// on a direct exchange, with the origin's name (the routing key of
// messages published to it through the default exchange — others are not
// captured, and the result says so). A dead-letter exchange that does not
// exist is declared, durable and fanout. A dead-letter exchange of ""
// (the default exchange) routes by name: the stream then takes the
// dead-letter routing key's name. It changes nothing on the origin, and
// leaves any queue already bound to the exchange (the old DLQ) bound.
//
// Not every broker dead-letters into a stream: RabbitMQ 3.10 drops a
// dead letter routed to one, silently (measured on 3.10.8; its stream
// queue ignores the broker's own, "stateless", deliveries). dlq init
// therefore tries it first on a throwaway exchange, stream and queue.
// Where dead letters do not arrive, it binds a classic queue,
// NAME.staging, to the exchange instead and has the broker's shovel
// (plugin rabbitmq_shovel) move what lands there into the stream, acking
// each message only once the stream has confirmed it (ack-mode
// on-confirm): it needs the management API to declare the shovel.

// initOpts are dlq init's URL keys.
type initOpts struct {
	dlq, dlx, dlxKey string
	dlxSet           bool
}

// initDefaultSuffix names the stream when dlq= does not.
const initDefaultSuffix = ".dlq-stream"

// initStreamDLQ is dlq init for amqp:// and amqps://.
func initStreamDLQ(ctx context.Context, raw string, opts backend.OpenOptions, dryRun bool) (backend.DLQInit, error) {
	src, err := parseURL(raw)
	if err != nil {
		return backend.DLQInit{}, err
	}
	q, err := Open(ctx, withoutInitKeys(raw), Options{Password: password(opts), Fields: opts.Fields})
	if err != nil {
		return backend.DLQInit{}, err
	}
	defer q.Close()
	if q.missing {
		return backend.DLQInit{}, backend.Configf("%s: dlq init: the origin queue %q does not exist in vhost %q (queue= names the queue whose dead letters to keep)", q, src.queue, src.vhost)
	}
	dlx, key, err := q.deadLetterRoute(ctx, src.init)
	if err != nil {
		return backend.DLQInit{}, err
	}
	name := src.init.dlq
	switch {
	case dlx == "" && key == "":
		return backend.DLQInit{}, backend.Configf("%s: dlq init: %q dead-letters through the default exchange with its messages' own routing keys: "+
			"there is no one queue to make a stream of; give it a dead-letter exchange (a policy's dead-letter-exchange) or a dead-letter routing key", q, src.queue)
	case dlx == "" && name != "" && name != key:
		return backend.DLQInit{}, backend.Configf("%s: dlq init: %q dead-letters to the queue %q through the default exchange: the stream must have that name (drop dlq=)", q, src.queue, key)
	case dlx == "":
		name = key
	case name == "":
		name = src.queue + initDefaultSuffix
	}
	res := backend.DLQInit{Stream: name, Source: initSource(q, name)}
	plan, err := q.streamPlan(ctx, name, dlx, key)
	if err != nil {
		return res, err
	}
	if err := q.planShovel(ctx, &plan); err != nil {
		return res, err
	}
	res.Subjects, res.Created = plan.subjects(), plan.createStream || plan.createExchange || plan.bind || plan.createShovel
	if dryRun {
		return res, nil
	}
	return res, q.applyStreamPlan(ctx, plan)
}

// withoutInitKeys is raw without dlq init's own keys: Open does not take
// them.
func withoutInitKeys(raw string) string {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw
	}
	var kept []string
	for _, kv := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if k != "dlq" && k != "dlx" && k != "dlx_routing_key" {
			kept = append(kept, kv)
		}
	}
	return base + "?" + strings.Join(kept, "&")
}

// initSource is the URL that reads the stream DLQ name.
func initSource(q *Queue, name string) string {
	s := q.src
	s.queue = name
	return s.Display()
}

// deadLetterRoute is where the origin's dead letters go: its dead-letter
// exchange and routing key ("" for none), from o where given, else from
// the management API.
func (q *Queue) deadLetterRoute(ctx context.Context, o initOpts) (dlx, key string, err error) {
	dlx, key = o.dlx, o.dlxKey
	if o.dlxSet {
		return dlx, key, nil
	}
	if q.admin == nil {
		return "", "", backend.Configf("%s: dlq init: reading %q's dead-letter exchange needs the management API: add admin=http://HOST:15672, or give dlx=EXCHANGE (and dlx_routing_key=KEY if it has one)", q, q.src.queue)
	}
	info, err := q.admin.queue(ctx, q.src.vhost, q.src.queue)
	if err != nil {
		return "", "", err
	}
	ex, hasEx := firstString(info.Arguments["x-dead-letter-exchange"], info.Effective["dead-letter-exchange"])
	if !hasEx {
		return "", "", backend.Configf("%s: dlq init: the queue %q has no dead-letter exchange (argument x-dead-letter-exchange, or a policy's dead-letter-exchange): "+
			"its rejected and expired messages are dropped; give it one with a policy (rabbitmqctl set_policy … '{\"dead-letter-exchange\":\"NAME\"}'), or give dlx=", q, q.src.queue)
	}
	if key == "" {
		key, _ = firstString(info.Arguments["x-dead-letter-routing-key"], info.Effective["dead-letter-routing-key"])
	}
	return ex, key, nil
}

// firstString is the first of vs that is a string.
func firstString(vs ...any) (string, bool) {
	for _, v := range vs {
		if s, ok := v.(string); ok {
			return s, true
		}
	}
	return "", false
}

// streamPlan is what dlq init creates or finds.
type streamPlan struct {
	name, exchange, exType string
	keys                   []string
	createStream           bool
	createExchange         bool
	bind                   bool // a binding is missing, or cannot be told present
	// byOrigin: bound with the origin's name for want of a dead-letter
	// routing key (direct, or a type the management API did not give).
	byOrigin bool
	// staging, when set, is the classic queue bound in the stream's place
	// (see planShovel); createShovel says its shovel is missing.
	staging      string
	createShovel bool
}

func (p streamPlan) subjects() []string {
	if p.exchange == "" {
		return []string{"queue " + p.name + " (the default exchange routes dead letters to it by name)"}
	}
	var out []string
	for _, k := range p.keys {
		s := "exchange:" + p.exchange + "/" + k
		if p.byOrigin {
			s += " (only dead letters routed with this key: those published to the origin through the default exchange)"
		}
		if p.staging != "" {
			s += " → queue " + p.staging + " → shovel " + shovelName(p.name) + " → stream " + p.name
		}
		out = append(out, s)
	}
	return out
}

// shovelName names the shovel that feeds the stream name.
func shovelName(name string) string { return "dlqctl-" + name }

// streamPlan reads what exists: the stream (which must be a stream if it
// does), the exchange and its type, and the binding keys it needs.
func (q *Queue) streamPlan(ctx context.Context, name, dlx, key string) (streamPlan, error) {
	p := streamPlan{name: name, exchange: dlx}
	typ, err := q.probeType(ctx, name)
	switch {
	case errors.Is(err, errNoQueue):
		p.createStream = true
	case err != nil:
		return p, err
	case typ != "stream":
		return p, backend.Configf("%s: dlq init: %q exists and is a %s queue, not a stream: give dlq=NAME for the stream", q, name, typ)
	}
	if dlx == "" {
		return p, nil
	}
	if p.exType, p.createExchange, err = q.exchangeType(ctx, dlx); err != nil {
		return p, err
	}
	switch {
	case p.exType == "headers":
		return p, backend.Configf("%s: dlq init: the dead-letter exchange %q is a headers exchange: bind the stream %q to it yourself, with the arguments its dead letters match", q, dlx, name)
	case key != "":
		p.keys = []string{key}
	case p.exType == "topic":
		p.keys = []string{"#"}
	case p.exType == "fanout" || p.createExchange:
		p.keys = []string{""}
	default:
		p.keys, p.byOrigin = []string{q.src.queue}, true
	}
	p.bind = true
	if !p.createStream && q.admin != nil {
		p.bind = !q.admin.bound(ctx, q.src.vhost, dlx, name, p.keys)
	}
	return p, nil
}

// exchangeType is the exchange's type ("" when it cannot be read without
// the management API), and whether it does not exist.
func (q *Queue) exchangeType(ctx context.Context, name string) (string, bool, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return "", false, err
	}
	err = ch.ExchangeDeclarePassive(name, "", true, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return "fanout", true, nil
	}
	if err != nil {
		return "", false, q.wrap(ctx, "look up the exchange "+name, err)
	}
	ch.Close()
	if q.admin == nil {
		return "", false, nil
	}
	var info struct {
		Type string `json:"type"`
	}
	if err := q.admin.get(ctx, "/api/exchanges/"+url.PathEscape(q.src.vhost)+"/"+url.PathEscape(name), &info); err != nil {
		return "", false, err
	}
	return info.Type, false, nil
}

// bound says whether the queue is bound to the exchange with every key.
func (a *adminClient) bound(ctx context.Context, vhost, exchange, queue string, keys []string) bool {
	var bs []struct {
		RoutingKey string `json:"routing_key"`
	}
	path := "/api/bindings/" + url.PathEscape(vhost) + "/e/" + url.PathEscape(exchange) + "/q/" + url.PathEscape(queue)
	if err := a.get(ctx, path, &bs); err != nil {
		return false
	}
	for _, k := range keys {
		found := false
		for _, b := range bs {
			found = found || b.RoutingKey == k
		}
		if !found {
			return false
		}
	}
	return true
}

// planShovel decides, when this broker drops dead letters routed to a
// stream, to bind a staging queue and shovel it into the stream; it needs
// the management API, and a dead-letter exchange other than the default
// one (which routes to the stream by name).
func (q *Queue) planShovel(ctx context.Context, p *streamPlan) error {
	ok, err := q.deadLettersReachStreams(ctx)
	if err != nil || ok {
		return err
	}
	lead := fmt.Sprintf("%s: dlq init: this broker (RabbitMQ %s) drops messages dead-lettered into a stream (dlq init routed one to a test stream: it never arrived)", q, q.server)
	switch {
	case p.exchange == "":
		return fmt.Errorf("%s, and %q dead-letters by name through the default exchange: keep a classic DLQ (docs/rabbitmq.md), or give it a dead-letter exchange", lead, q.src.queue)
	case q.admin == nil:
		return backend.Configf("%s: a shovel from a classic staging queue can feed the stream, which dlq init declares through the management API: add admin=http://HOST:15672", lead)
	}
	p.staging = p.name + ".staging"
	typ, err := q.probeType(ctx, p.staging)
	switch {
	case errors.Is(err, errNoQueue):
	case err != nil:
		return err
	case typ != "classic":
		return backend.Configf("%s: dlq init: %q exists and is a %s queue: dlq init stages dead letters for the stream in a classic queue of that name", q, p.staging, typ)
	}
	if p.bind = true; !p.createStream {
		p.bind = !q.admin.bound(ctx, q.src.vhost, p.exchange, p.staging, p.keys)
	}
	var param map[string]any
	err = q.admin.get(ctx, "/api/parameters/shovel/"+url.PathEscape(q.src.vhost)+"/"+url.PathEscape(shovelName(p.name)), &param)
	p.createShovel = err != nil
	return nil
}

// deadLettersReachStreams tries on this broker whether a dead letter
// routed to a stream arrives: a throwaway fanout exchange, stream and
// exclusive queue, one message rejected into them. All three are gone
// afterwards.
func (q *Queue) deadLettersReachStreams(ctx context.Context) (bool, error) {
	c, err := q.dial(ctx, q.cfg)
	if err != nil {
		return false, err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return false, q.wrap(ctx, "open a channel", err)
	}
	raw := make([]byte, 6)
	if _, err := rand.Read(raw); err != nil {
		return false, err
	}
	name := "dlqctl.probe-" + hex.EncodeToString(raw)
	fail := func(what string, err error) (bool, error) {
		return false, q.wrap(ctx, "dlq init: try dead-lettering into a stream: "+what, err)
	}
	if err := ch.ExchangeDeclare(name, "fanout", false, true, false, false, nil); err != nil {
		return fail("declare an exchange", err)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		return fail("declare a stream", err)
	}
	defer func() {
		if dch, err := c.Channel(); err == nil {
			dch.QueueDelete(name, false, false, false)
		}
	}()
	if err := ch.QueueBind(name, "", name, false, nil); err != nil {
		return fail("bind", err)
	}
	src := name + ".src"
	if _, err := ch.QueueDeclare(src, false, false, true, false, amqp.Table{"x-dead-letter-exchange": name}); err != nil {
		return fail("declare a queue", err)
	}
	if err := ch.PublishWithContext(ctx, "", src, false, false, amqp.Publishing{Body: []byte("dlqctl dlq init probe")}); err != nil {
		return fail("publish", err)
	}
	var d amqp.Delivery
	for ok := false; !ok; {
		if d, ok, err = ch.Get(src, false); err != nil {
			return fail("get", err)
		}
	}
	if err := d.Nack(false, false); err != nil {
		return fail("reject", err)
	}
	rch, err := c.Channel()
	if err != nil {
		return fail("open a channel", err)
	}
	_, ok, err := q.probeChunk(ctx, rch, name, "first")
	return ok, err
}

// forgetRecordOf deletes dlqctl's record of removals of the DLQ name
// (its pages, key and epoch queues) before dlq init makes that DLQ anew:
// a record outlives the DLQ it was kept for, and its offsets and contents
// would name the new stream's first messages — the same event
// dead-lettered again is byte for byte what was removed from the old one.
func (q *Queue) forgetRecordOf(ctx context.Context, ch *amqp.Channel, name string) error {
	rec := bookNameOf("dlqctl.removed.", name)
	for _, b := range []string{rec, rec + ".key", bookNameOf("dlqctl.epoch.", name)} {
		if _, err := ch.QueueDelete(b, false, false, false); err != nil {
			return q.wrap(ctx, "delete "+b+", the record of a DLQ "+name+" that no longer exists", err)
		}
	}
	return nil
}

// applyStreamPlan declares what p says is missing: the stream, the
// exchange, the bindings (declaring and binding again are no-ops), and,
// where the broker cannot dead-letter into a stream, the staging queue
// and its shovel.
func (q *Queue) applyStreamPlan(ctx context.Context, p streamPlan) error {
	ch, err := q.channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if p.createStream {
		if err := q.forgetRecordOf(ctx, ch, p.name); err != nil {
			return err
		}
	}
	if _, err := ch.QueueDeclare(p.name, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		return q.wrap(ctx, "declare the stream "+p.name, err)
	}
	if p.exchange == "" {
		return nil
	}
	if p.createExchange {
		if err := ch.ExchangeDeclare(p.exchange, "fanout", true, false, false, false, nil); err != nil {
			return q.wrap(ctx, "declare the dead-letter exchange "+p.exchange, err)
		}
	}
	target := p.name
	if p.staging != "" {
		if _, err := ch.QueueDeclare(p.staging, true, false, false, false, nil); err != nil {
			return q.wrap(ctx, "declare the staging queue "+p.staging, err)
		}
		target = p.staging
	}
	for _, k := range p.keys {
		if err := ch.QueueBind(target, k, p.exchange, false, nil); err != nil {
			return q.wrap(ctx, fmt.Sprintf("bind %s to %s with %q", target, p.exchange, k), err)
		}
	}
	if p.staging == "" || !p.createShovel {
		return nil
	}
	local := "amqp:///" + url.PathEscape(q.src.vhost)
	err = q.admin.put(ctx, "/api/parameters/shovel/"+url.PathEscape(q.src.vhost)+"/"+url.PathEscape(shovelName(p.name)), map[string]any{
		"value": map[string]any{
			"src-protocol": "amqp091", "src-uri": local, "src-queue": p.staging,
			"dest-protocol": "amqp091", "dest-uri": local, "dest-queue": p.name,
			"ack-mode": "on-confirm", "src-delete-after": "never",
		},
	})
	if err != nil {
		return fmt.Errorf("%s: dlq init: declare the shovel %s (is the rabbitmq_shovel plugin enabled? rabbitmq-plugins enable rabbitmq_shovel): %w", q, shovelName(p.name), err)
	}
	return nil
}
