package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
)

// adminClient reads the management API (admin=). It takes the AMQP
// credentials unless the admin URL has user info of its own.
type adminClient struct {
	base       string // without user info or trailing slash
	user, pass string
	hc         *http.Client
	secrets    []string
}

func newAdminClient(s sourceURL) *adminClient {
	a := &adminClient{base: s.admin, hc: &http.Client{Timeout: s.timeout}}
	a.user, a.pass = s.user, s.password
	if a.user == "" && a.pass == "" {
		a.user, a.pass = "guest", "guest"
	}
	if u, err := url.Parse(s.admin); err == nil && u.User != nil {
		a.user = u.User.Username()
		a.pass, _ = u.User.Password()
		u.User = nil
		a.base = strings.TrimSuffix(u.String(), "/")
	}
	a.secrets = append(s.adminSecrets(), a.pass)
	if tc, err := s.tlsConfig(); err == nil && tc != nil && strings.HasPrefix(a.base, "https://") {
		a.hc.Transport = &http.Transport{TLSClientConfig: tc}
	}
	return a
}

// queueInfo is the part of GET /api/queues/VHOST/NAME dlqctl reads.
type queueInfo struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Durable   bool           `json:"durable"`
	Messages  int64          `json:"messages"`
	Ready     int64          `json:"messages_ready"`
	Unacked   int64          `json:"messages_unacknowledged"`
	Consumers int64          `json:"consumers"`
	Arguments map[string]any `json:"arguments"`
	Policy    string         `json:"policy"`
	OpPolicy  string         `json:"operator_policy"`
	Effective map[string]any `json:"effective_policy_definition"`
}

// deliveryLimit is a quorum queue's effective delivery limit, resolved as
// the broker resolves its x-delivery-limit argument and its policies'
// delivery-limit; limited is false when it has none. A message is
// dropped (or dead-lettered onward) once a return takes its delivery
// count past the limit, so a limit of 0 drops it at its first return.
//
// RabbitMQ 3.x takes the lower of the two, and a value of 0 or below is a
// limit like any other (measured on 3.10.8: 0, -1 and -5 drop a message at
// its first return; a policy refuses a negative value). 4.x takes the
// higher of the two when either is negative, reads a negative result as
// no limit, and gives every quorum queue a limit of 20 when nothing sets
// one.
func (i queueInfo) deliveryLimit(server string) (limit int, limited bool) {
	if i.Type != "quorum" {
		return 0, false
	}
	var set []int
	for _, v := range []any{i.Arguments["x-delivery-limit"], i.Effective["delivery-limit"]} {
		if f, ok := v.(float64); ok {
			set = append(set, int(f))
		}
	}
	v4 := majorVersion(server) >= 4
	switch {
	case len(set) == 0 && v4:
		return 20, true
	case len(set) == 0:
		return 0, false
	}
	limit = set[0]
	for _, n := range set[1:] {
		if v4 && (n < 0 || limit < 0) {
			limit = max(limit, n)
		} else {
			limit = min(limit, n)
		}
	}
	if limit < 0 {
		if v4 {
			return 0, false
		}
		limit = 0
	}
	return limit, true
}

func majorVersion(v string) int {
	s, _, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(s)
	return n
}

var errAdminNotFound = errors.New("not found")

func (a *adminClient) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(a.user, a.pass)
	resp, err := a.hc.Do(req)
	if err != nil {
		return backend.Scrub(fmt.Errorf("management API %s: %w", backend.RedactURL(a.base), err), a.secrets...)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errAdminNotFound
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("management API %s: 401 unauthorized: the user may not use the management API (give admin=http://USER:PASS@HOST:15672)", backend.RedactURL(a.base))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("management API %s: %s", backend.RedactURL(a.base), resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("management API %s: unreadable answer: %v", backend.RedactURL(a.base), err)
	}
	return nil
}

// put sends body (as JSON) to path; a refusal is an error with the
// broker's reason.
func (a *adminClient) put(ctx context.Context, path string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, a.base+path, strings.NewReader(string(raw)))
	if err != nil {
		return err
	}
	req.SetBasicAuth(a.user, a.pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return backend.Scrub(fmt.Errorf("management API %s: %w", backend.RedactURL(a.base), err), a.secrets...)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("management API %s: PUT %s: %s %s", backend.RedactURL(a.base), path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

func (a *adminClient) queue(ctx context.Context, vhost, name string) (queueInfo, error) {
	var info queueInfo
	err := a.get(ctx, "/api/queues/"+url.PathEscape(vhost)+"/"+url.PathEscape(name), &info)
	if errors.Is(err, errAdminNotFound) {
		return info, fmt.Errorf("management API: the queue %q %w in vhost %q", name, errNoQueue, vhost)
	}
	return info, err
}

// Stats is the RabbitMQ section of `stats` (JSON under "backend").
type Stats struct {
	Queue     string         `json:"queue"`
	Vhost     string         `json:"vhost"`
	Type      string         `json:"type,omitempty"`
	Messages  int64          `json:"messages"`
	Ready     int64          `json:"ready"`
	Unacked   int64          `json:"unacked"`
	Consumers int64          `json:"consumers"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Policy    string         `json:"policy,omitempty"`
	// DeliveryLimit is a quorum DLQ's effective delivery limit; nil for
	// none (0: a message is dropped at its first return).
	DeliveryLimit *int `json:"delivery_limit,omitempty"`
	// Source says where the counts come from: "management" (lags a few
	// seconds) or "amqp" (ready messages and consumers only).
	Source string `json:"source"`
	// CameBack counts messages in the queue that dlqctl removed (a broker
	// crash lost the acks, or an ack never reached the broker): the
	// removal record hides them from every read, and the next run that
	// removes entries acks them again.
	CameBack int64 `json:"came_back"`
	// NotSeen counts messages other consumers held unacknowledged while
	// the scan read (from the management API): not in the totals.
	NotSeen int64 `json:"not_seen"`
	// RecordEntries is the size of dlqctl's removal record for this DLQ.
	RecordEntries int `json:"record_entries"`
	// RecordIgnored counts messages in the record's streams that dlqctl
	// did not write: they count for nothing.
	RecordIgnored int `json:"record_ignored,omitempty"`
}

// Extras reports the DLQ queue's depth, ready and unacked messages,
// consumers and arguments (through the management API when admin= is
// set, else the ready count and consumers from a passive declare), its
// type, and what the last whole read learnt: entries dlqctl removed that
// are back in the queue, and messages other consumers held.
func (q *Queue) Extras(ctx context.Context, _ []string) (backend.ExtraStats, error) {
	st := Stats{Queue: q.src.queue, Vhost: q.src.vhost, Source: "amqp"}
	if q.admin != nil {
		info, err := q.admin.queue(ctx, q.src.vhost, q.src.queue)
		if err != nil {
			return backend.ExtraStats{}, err
		}
		st = Stats{Queue: q.src.queue, Vhost: q.src.vhost, Type: info.Type, Messages: info.Messages, Ready: info.Ready,
			Unacked: info.Unacked, Consumers: info.Consumers, Arguments: info.Arguments, Policy: info.Policy, Source: "management"}
		if limit, ok := info.deliveryLimit(q.server); ok {
			st.DeliveryLimit = &limit
		}
	} else if !q.missing {
		qs, err := q.inspect(ctx)
		if err != nil {
			return backend.ExtraStats{}, err
		}
		st.Messages, st.Ready, st.Consumers = int64(qs.Messages), int64(qs.Messages), int64(qs.Consumers)
		if sh, err := q.shapeOf(ctx); err == nil {
			st.Type = sh.Type
		}
	}
	q.mu.Lock()
	st.CameBack, st.NotSeen = q.hiddenSeen, q.unseen
	q.mu.Unlock()
	q.rec.mu.Lock()
	if q.rec.set != nil {
		st.RecordEntries = q.rec.set.size()
	}
	st.RecordIgnored = q.rec.forged
	q.rec.mu.Unlock()
	return backend.ExtraStats{JSON: st, Title: "RabbitMQ queue", Rows: st.rows()}, nil
}

// rows are st as a table's rows.
func (st Stats) rows() [][2]string {
	rows := [][2]string{
		{"queue", st.Queue + " (vhost " + st.Vhost + ")"},
		{"messages", fmt.Sprintf("%d (ready %d, unacked %d)", st.Messages, st.Ready, st.Unacked)},
		{"consumers", strconv.FormatInt(st.Consumers, 10)},
	}
	if st.Type != "" {
		rows = append(rows, [2]string{"type", shapeNote(st.Type, st.DeliveryLimit)})
	}
	if len(st.Arguments) > 0 {
		b, _ := json.Marshal(st.Arguments)
		rows = append(rows, [2]string{"arguments", string(b)})
	}
	if st.Policy != "" {
		rows = append(rows, [2]string{"policy", st.Policy})
	}
	if st.CameBack > 0 {
		rows = append(rows, [2]string{"came back", fmt.Sprintf("%d messages dlqctl removed are in the queue again (a broker crash lost the acks, or an ack never reached the broker): "+
			"they are not counted, listed or planned, and the next run that removes entries acks them again", st.CameBack)})
	}
	if st.NotSeen > 0 {
		rows = append(rows, [2]string{"not seen", fmt.Sprintf("%d messages were held unacknowledged by other consumers while dlqctl read the queue: not in the totals above", st.NotSeen)})
	}
	if st.RecordEntries > 0 || st.RecordIgnored > 0 {
		r := fmt.Sprintf("%d entries", st.RecordEntries)
		if st.RecordIgnored > 0 {
			r += fmt.Sprintf("; %d messages dlqctl did not write were ignored", st.RecordIgnored)
		}
		rows = append(rows, [2]string{"removal record", r})
	}
	if st.Source == "amqp" {
		rows = append(rows, [2]string{"note", "ready messages only: add admin= for unacked messages, arguments and the delivery limit"})
	}
	return rows
}

// shapeNote says what a DLQ of type typ with the delivery limit limit
// (nil: none) costs to read.
func shapeNote(typ string, limit *int) string {
	switch {
	case typ == "stream":
		return "stream: read by offset, reads cost nothing; removals are recorded by dlqctl"
	case typ == "quorum" && limit != nil && *limit < 2:
		return fmt.Sprintf("quorum, delivery limit %d: any read would bring a message to the limit or past it, so dlqctl does not read it (dlqctl dlq init makes a stream DLQ)", *limit)
	case typ == "quorum" && limit != nil:
		return fmt.Sprintf("quorum, delivery limit %d: every read counts as a delivery", *limit)
	case typ == "quorum":
		return "quorum, no delivery limit: every read counts as a delivery, none can drop a message"
	}
	return typ + ": reads give every message back in place, at no cost"
}

// Unseen is how many messages other consumers held unacknowledged during
// the last whole read (what it could not see).
func (q *Queue) Unseen() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.unseen
}

// DoctorChecks gives doctor its line on the DLQ itself (CheckDLQ).
func (q *Queue) DoctorChecks(ctx context.Context) []backend.DoctorCheck {
	st := q.CheckDLQ(ctx)
	return []backend.DoctorCheck{{Name: "dlq shape", OK: st.OK, Detail: st.Detail, Fix: st.Fix}}
}

// CheckDLQ is doctor's line on the DLQ itself: its type, its effective
// delivery limit and how many more reads dlqctl has before it refuses to
// read it (a quorum DLQ counts each of them as a delivery), and whether
// the management API answers.
func (q *Queue) CheckDLQ(ctx context.Context) backend.OriginStatus {
	api := "management API not set (admin=): stats counts ready messages only"
	if q.admin != nil {
		if _, err := q.admin.queue(ctx, q.src.vhost, q.src.queue); err != nil {
			return backend.OriginStatus{Detail: err.Error(), Fix: "check admin= (the management plugin's URL, and a user tagged management)"}
		}
		api = "management API answers"
	}
	sh, err := q.shapeOf(ctx)
	if err != nil {
		return backend.OriginStatus{Detail: err.Error(), Fix: "check the broker"}
	}
	switch {
	case sh.Type == "stream":
		return backend.OriginStatus{OK: true, Detail: "a stream DLQ: read by offset with no delivery counts, so reads cost nothing; what dlqctl redrives or resolves is recorded in " +
			q.recordNote() + " and skipped by every read; the stream's retention (x-max-age, x-max-length-bytes) is what drops messages; " + api}
	case sh.Type == "quorum" && !sh.Known:
		return backend.OriginStatus{Detail: "a quorum queue, which counts every read as a delivery; its delivery limit cannot be read without admin=, so dlqctl does not read it; " + api,
			Fix: "add admin=http://HOST:15672, or dead-letter into a stream DLQ (dlqctl dlq init amqp://…?queue=ORIGIN) or a classic queue (docs/rabbitmq.md)"}
	case sh.Type == "quorum" && sh.Limited && sh.Limit < 2:
		return backend.OriginStatus{Detail: fmt.Sprintf("a quorum queue with delivery limit %d: any read would bring a message to the limit or past it, so dlqctl reads nothing from it; %s", sh.Limit, api),
			Fix: "dead-letter into a stream DLQ (dlqctl dlq init amqp://…?queue=ORIGIN) and move these messages there with something that acks what it takes (a shovel), or raise the limit with a policy"}
	case sh.Type == "quorum" && sh.Limited:
		prior, err := q.readReads(ctx)
		if err != nil {
			return backend.OriginStatus{Detail: err.Error(), Fix: "check the broker"}
		}
		// A read is refused once it would bring a message above limit-1,
		// the ceiling that keeps one read in hand.
		g := quorumGuard{limit: int64(sh.Limit)}
		left := max(g.ceiling()-prior, 0)
		detail := fmt.Sprintf("a quorum queue with delivery limit %d: every read by dlqctl (a scan, each chunk and batch of a redrive) counts as a delivery; "+
			"its reads so far left x-delivery-count at up to %d (recorded in %s): %d more before it refuses to read (it leaves every message one read below the limit); %s",
			sh.Limit, prior, q.readsQueue(), left, api)
		if left == 0 {
			return backend.OriginStatus{Detail: detail,
				Fix: fmt.Sprintf("dead-letter into a stream DLQ (dlqctl dlq init amqp://…?queue=ORIGIN), raise the limit with a policy (4.x: delivery-limit -1 for none), or move the messages to a classic queue and delete %s", q.readsQueue())}
		}
		return backend.OriginStatus{OK: true, Detail: detail + "; a stream DLQ (dlqctl dlq init) is the shape that reads for free"}
	case sh.Type == "quorum":
		return backend.OriginStatus{OK: true, Detail: "a quorum queue with no delivery limit: every read counts as a delivery but none can drop a message; its acks are written lazily, so dlqctl records what it removes; " + api}
	}
	return backend.OriginStatus{OK: true, Detail: "a " + sh.Type + " queue: reads give every message back in place, no delivery limit; its acks are written lazily, so dlqctl records what it removes; " + api}
}

// CheckOrigin says whether an origin queue exists and has consumers.
func (q *Queue) CheckOrigin(ctx context.Context, origin string, _ []string) backend.OriginStatus {
	dest, err := parseDest(origin)
	if err != nil {
		return backend.OriginStatus{Detail: err.Error(), Fix: "redrive with --to QUEUE or --to exchange:EX/KEY"}
	}
	if dest.exchange != "" {
		return backend.OriginStatus{OK: true, Detail: fmt.Sprintf("exchange %q, routing key %q (routing checked at publish: mandatory)", dest.exchange, dest.key)}
	}
	st, err := q.inspectQueue(ctx, dest.key)
	switch {
	case errors.Is(err, errNoQueue):
		return backend.OriginStatus{Detail: fmt.Sprintf("queue %q does not exist in vhost %q", dest.key, q.src.vhost),
			Fix: "declare it, or redrive with --to QUEUE"}
	case err != nil:
		return backend.OriginStatus{Detail: err.Error(), Fix: "check the broker"}
	case st.Consumers == 0:
		return backend.OriginStatus{Detail: fmt.Sprintf("queue %q exists (%d ready) but has no consumer: redriven messages would wait there", dest.key, st.Messages),
			Fix: "start the consumer before a redrive"}
	}
	return backend.OriginStatus{OK: true, Detail: fmt.Sprintf("queue %q exists, %d consumers", dest.key, st.Consumers)}
}
