package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dlqctl/dlqctl/backend"
)

// Configs of a share group's dead-lettering (KIP-1191): the group's DLQ
// topic, whether the dead letter copies the record, the delivery limit,
// and the topic's opt-in to receiving dead letters.
const (
	GroupDLQTopic      = "errors.deadletterqueue.topic.name"
	GroupDLQCopyRecord = "errors.deadletterqueue.copy.record.enable"
	GroupDeliveryLimit = "share.delivery.count.limit"
	TopicDLQEnable     = "errors.deadletterqueue.group.enable"
)

// initShareDLQ is dlq init for a share group (backend.DLQInitFunc):
// kafka://…?group=G[&topic=T][&copy=true] makes T (default dlq.G) with
// errors.deadletterqueue.group.enable=true, or turns that on for an
// existing T, and sets the group's errors.deadletterqueue.topic.name to T
// (and copy.record.enable when copy= is given). A group whose dead
// letters go to another topic already is refused: dlqctl reads that one.
func initShareDLQ(ctx context.Context, raw string, opts backend.OpenOptions, dryRun bool) (backend.DLQInit, error) {
	rest, group, copyRecord, err := splitShareInit(raw)
	if err != nil {
		return backend.DLQInit{}, err
	}
	t, err := Open(ctx, rest, Options{Password: password(opts), Stderr: opts.Stderr})
	if err != nil {
		return backend.DLQInit{}, err
	}
	defer t.Close()
	topic := t.src.topic
	res := backend.DLQInit{Source: t.src.Display(), Stream: topic, Subjects: []string{group}}
	cfgs, err := groupConfigs(ctx, t.cl, group)
	if err != nil {
		return res, t.connErr(ctx, "configs of group "+group, err)
	}
	cur := cfgs[group]
	if have := cur[GroupDLQTopic]; have != "" && have != topic {
		return res, backend.Configf("kafka: share group %s already dead-letters to %s: read it with kafka://…?topic=%s", group, have, have)
	}
	enabled := false
	if !t.missing {
		tc, err := t.adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return res, t.connErr(ctx, "configs of "+topic, err)
		}
		if rc, err := tc.On(topic, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key == TopicDLQEnable && c.Value != nil && *c.Value == "true" {
					enabled = true
				}
			}
		}
	}
	copyChange := copyRecord != "" && cur[GroupDLQCopyRecord] != copyRecord
	res.Created = t.missing || !enabled || cur[GroupDLQTopic] != topic || copyChange
	if dryRun || !res.Created {
		return res, nil
	}
	on := "true"
	switch {
	case t.missing:
		// The broker's default partitions and replication.
		resp, err := t.adm.CreateTopic(ctx, -1, -1, map[string]*string{TopicDLQEnable: &on}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return res, t.connErr(ctx, "create "+topic, err)
		}
	case !enabled:
		resp, err := t.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: TopicDLQEnable, Value: &on}}, topic)
		if err == nil {
			_, err = resp.On(topic, nil)
		}
		if err != nil {
			return res, t.connErr(ctx, "enable dead letters on "+topic, err)
		}
	}
	set := map[string]string{GroupDLQTopic: topic}
	if copyRecord != "" {
		set[GroupDLQCopyRecord] = copyRecord
	}
	if err := SetGroupConfigs(ctx, t.cl, group, set); err != nil {
		return res, t.connErr(ctx, "set the configs of group "+group, err)
	}
	return res, t.initVisible(ctx, topic, group, set)
}

// initVisible waits, a bounded while, until the broker's reads show what
// dlq init set: the controller answers before the broker's metadata has
// it, and a second dlq init (or a doctor) run at once would read the
// settings as missing. Past the bound it says so.
func (t *Topic) initVisible(ctx context.Context, topic, group string, set map[string]string) error {
	deadline := time.Now().Add(initVisibleWait)
	for {
		cfgs, err := groupConfigs(ctx, t.cl, group)
		done := err == nil
		for k, v := range set {
			done = done && cfgs[group][k] == v
		}
		if done {
			tc, err := t.adm.DescribeTopicConfigs(ctx, topic)
			rc, rerr := tc.On(topic, nil)
			done = err == nil && rerr == nil && slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool {
				return c.Key == TopicDLQEnable && c.Value != nil && *c.Value == "true"
			})
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kafka: dlq init set %s and group %s up, and the broker does not show it after %s: run dlq init again to see", topic, group, initVisibleWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// initVisibleWait bounds initVisible.
const initVisibleWait = 30 * time.Second

// splitShareInit takes group= and copy= out of a dlq init URL and adds
// topic=dlq.GROUP when the URL names no topic: what is left opens as a
// source.
func splitShareInit(raw string) (rest, group, copyRecord string, err error) {
	base, query, _ := strings.Cut(raw, "?")
	q, perr := url.ParseQuery(query)
	if perr != nil {
		return "", "", "", backend.Configf("kafka source %s: %v", backend.URLForError(raw), perr)
	}
	group = q.Get("group")
	if group == "" {
		return "", "", "", backend.Configf("kafka source %s: dlq init needs &group=G (the share group whose dead letters to keep)", backend.URLForError(raw))
	}
	if c := q.Get("copy"); c != "" {
		b, err := strconv.ParseBool(c)
		if err != nil {
			return "", "", "", backend.Configf("kafka source %s: copy=%q: want true or false", backend.URLForError(raw), c)
		}
		copyRecord = strconv.FormatBool(b)
	}
	q.Del("group")
	q.Del("copy")
	if q.Get("topic") == "" {
		q.Set("topic", "dlq."+group)
	}
	return base + "?" + q.Encode(), group, copyRecord, nil
}

// groupConfigs reads the configs of groups (resource type GROUP), by
// group: those set on the group and the broker's defaults it falls back on.
func groupConfigs(ctx context.Context, cl *kgo.Client, groups ...string) (map[string]map[string]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, g := range groups {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("group %s: %w", r.ResourceName, err)
		}
		m := map[string]string{}
		for _, c := range r.Configs {
			if c.Value != nil {
				m[c.Name] = *c.Value
			}
		}
		out[r.ResourceName] = m
	}
	return out, nil
}

// SetGroupConfigs sets configs of a group (resource type GROUP: a share
// group's dead-letter topic, copy mode, delivery limit, start offset).
func SetGroupConfigs(ctx context.Context, cl *kgo.Client, group string, set map[string]string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range set {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if r.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *r.ErrorMessage)
			}
			return err
		}
	}
	return nil
}
