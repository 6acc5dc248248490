package pulsardlq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/report"
)

// admin is the little of the broker's admin REST API (/admin/v2) that the
// binary protocol does not offer: a subscription's cursor (which messages
// it acknowledged), its backlog, and topic metadata.
type admin struct {
	base  *url.URL
	token string
	http  *http.Client
}

// errAdminNotFound is a 404 from the admin API.
var errAdminNotFound = errors.New("not found")

// adminError is a non-2xx answer.
type adminError struct {
	status int
	method string
	path   string
	reason string
}

func (e *adminError) Error() string {
	msg := fmt.Sprintf("admin %s %s: HTTP %d", e.method, e.path, e.status)
	if e.reason != "" {
		msg += ": " + e.reason
	}
	switch e.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += " (check the token in DLQCTL_PULSAR_TOKEN or DLQCTL_PULSAR_TOKEN_FILE and its permissions)"
	}
	return msg
}

func (e *adminError) Is(target error) bool {
	return target == errAdminNotFound && e.status == http.StatusNotFound
}

// do sends one request; in (when not nil) goes as JSON, and a 2xx answer
// is decoded into out (when not nil).
func (a *admin) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	// Topic names are path-escaped in path; url.Parse keeps them so.
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(a.base.String(), "/")+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// *url.Error names the URL, which holds no secret.
		return fmt.Errorf("admin %s %s: %w", method, pathOnly(path), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin %s %s: %w", method, pathOnly(path), err)
	}
	if resp.StatusCode/100 != 2 {
		var r struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(raw, &r)
		if r.Reason == "" {
			r.Reason = strings.TrimSpace(string(raw))
		}
		// A broker's error page reaches the terminal: cut it short and
		// make it safe there, as table cells are.
		r.Reason = report.Truncate(r.Reason, 200)
		return &adminError{status: resp.StatusCode, method: method, path: pathOnly(path), reason: r.Reason}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("admin %s %s: unexpected answer: %v", method, pathOnly(path), err)
		}
	}
	return nil
}

func pathOnly(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i]
	}
	return p
}

// partitions is the topic's partition count: 0 for a non-partitioned
// topic, and for one that does not exist yet.
func (a *admin) partitions(ctx context.Context, t topicName) (int, error) {
	n, _, err := a.topicExists(ctx, t)
	return n, err
}

// topicExists is the topic's partition count and whether it exists.
func (a *admin) topicExists(ctx context.Context, t topicName) (partitions int, exists bool, err error) {
	var meta struct {
		Partitions int `json:"partitions"`
	}
	err = a.do(ctx, http.MethodGet, t.adminPath()+"/partitions", nil, &meta)
	if errors.Is(err, errAdminNotFound) {
		return 0, false, nil
	}
	return meta.Partitions, err == nil, err
}

// createSubscription creates the durable subscription at the earliest
// message, without consuming anything. An existing one is left as it is.
// On a partitioned topic it is created on every partition; a topic that
// does not exist yet is created (non-partitioned).
func (a *admin) createSubscription(ctx context.Context, t topicName, sub string) error {
	earliest := map[string]int64{"ledgerId": -1, "entryId": -1, "partitionIndex": -1}
	err := a.do(ctx, http.MethodPut, t.adminPath()+"/subscription/"+url.PathEscape(sub), earliest, nil)
	var ae *adminError
	if errors.As(err, &ae) && ae.status == http.StatusConflict {
		return nil
	}
	return err
}

// cursorStats is the part of internalStats that dlqctl reads.
type internalStats struct {
	LastConfirmedEntry string `json:"lastConfirmedEntry"`
	Ledgers            []struct {
		LedgerID int64 `json:"ledgerId"`
		Entries  int64 `json:"entries"`
	} `json:"ledgers"`
	Cursors map[string]struct {
		MarkDeletePosition          string `json:"markDeletePosition"`
		IndividuallyDeletedMessages string `json:"individuallyDeletedMessages"`
	} `json:"cursors"`
}

func (a *admin) internalStats(ctx context.Context, t topicName) (internalStats, error) {
	var st internalStats
	err := a.do(ctx, http.MethodGet, t.adminPath()+"/internalStats", nil, &st)
	return st, err
}

// SubscriptionStats are the facts of the DLQ subscription that `stats`
// shows (Pulsar's topic stats, subscriptions[SUB]).
type subscriptionStats struct {
	MsgBacklog                      int64   `json:"msgBacklog"`
	BacklogSize                     int64   `json:"backlogSize"`
	MsgRateOut                      float64 `json:"msgRateOut"`
	MsgRateRedeliver                float64 `json:"msgRateRedeliver"`
	UnackedMessages                 int64   `json:"unackedMessages"`
	Type                            string  `json:"type"`
	EarliestMsgPublishTimeInBacklog int64   `json:"earliestMsgPublishTimeInBacklog"`
	Consumers                       []struct {
		ConsumerName string `json:"consumerName"`
	} `json:"consumers"`
}

type topicStats struct {
	Subscriptions map[string]subscriptionStats `json:"subscriptions"`
}

// stats reads the topic's stats (summed over partitions for a
// partitioned topic) with a precise backlog.
func (a *admin) stats(ctx context.Context, t topicName, partitioned bool) (topicStats, error) {
	var st topicStats
	path := t.adminPath() + "/stats?getPreciseBacklog=true"
	if partitioned {
		path = t.adminPath() + "/partitioned-stats?getPreciseBacklog=true&perPartition=false"
	}
	err := a.do(ctx, http.MethodGet, path, nil, &st)
	return st, err
}

// lastMessageID is the topic's last message (entryId -1 when empty).
type lastMessageID struct {
	LedgerID   int64 `json:"ledgerId"`
	EntryID    int64 `json:"entryId"`
	BatchIndex int32 `json:"batchIndex"`
}

func (a *admin) lastMessageID(ctx context.Context, t topicName) (lastMessageID, error) {
	var id lastMessageID
	err := a.do(ctx, http.MethodGet, t.adminPath()+"/lastMessageId", nil, &id)
	return id, err
}

func newAdmin(base *url.URL, token string, tr *http.Transport) *admin {
	return &admin{base: base, token: token, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// namespaceOf checks, through the topic's partition metadata, that the
// topic's tenant and namespace exist (the topic itself need not: the
// broker creates it on the first send where that is allowed). nil: they
// exist; a *backend.GuardUnavailable: the admin API could not tell.
func (a *admin) namespaceOf(ctx context.Context, t topicName) error {
	err := a.do(ctx, http.MethodGet, t.adminPath()+"/partitions", nil, nil)
	var ae *adminError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.status == http.StatusNotFound && strings.Contains(strings.ToLower(ae.reason), "namespace"):
		tenant := ""
		switch terr := a.do(ctx, http.MethodGet, "/admin/v2/tenants/"+url.PathEscape(t.tenant), nil, nil); {
		case terr == nil:
			tenant = " (tenant " + t.tenant + " exists)"
		case errors.Is(terr, errAdminNotFound):
			tenant = " (tenant " + t.tenant + " does not exist either)"
		}
		return fmt.Errorf("namespace %s/%s does not exist on the broker%s: no message can be sent to %s", t.tenant, t.namespace, tenant, t)
	case errors.Is(err, errAdminNotFound):
		return nil // the namespace is there; the topic is not yet
	}
	return &backend.GuardUnavailable{Err: err}
}

// bookkeeping refuses a topic marked as holding dlqctl's bookkeeping (the
// topic property dlqctl-bookkeeping); a topic that does not exist yet holds
// nothing. A *backend.GuardUnavailable: the admin API could not tell.
func (a *admin) bookkeeping(ctx context.Context, t topicName) error {
	props := map[string]string{}
	err := a.do(ctx, http.MethodGet, t.adminPath()+"/properties", nil, &props)
	switch {
	case errors.Is(err, errAdminNotFound):
		return nil
	case err != nil:
		return &backend.GuardUnavailable{Err: err}
	}
	if what, ok := props[bookkeepingProperty]; ok {
		return fmt.Errorf("%s holds dlqctl's bookkeeping (%s: %s)", t, bookkeepingProperty, what)
	}
	return nil
}
