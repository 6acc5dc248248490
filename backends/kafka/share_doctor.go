package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/dlqctl/dlqctl/backend"
)

// shortRetention is below Kafka's default retention (7 days): a source
// topic that keeps records for less, under a share group whose dead
// letters hold no copy, gives an operator little time to redrive.
const shortRetention = 7 * 24 * time.Hour

// DoctorChecks gives doctor a line for each share group that dead-letters
// into this topic: its copy mode and delivery limit, failing when copy is
// off and a topic the group reads keeps records for less than
// shortRetention (a dead letter is then redrivable only while its source
// record lasts). A topic no share group writes to gets no line.
func (t *Topic) DoctorChecks(ctx context.Context) []backend.DoctorCheck {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	listed, err := t.adm.ListGroupsByType(ctx, []string{"share"})
	var denied *kadm.AuthError
	switch {
	case errors.As(err, &denied):
		return []backend.DoctorCheck{{Name: "share groups", Detail: t.connErr(ctx, "list share groups", err).Error(),
			Fix: "dlqctl needs Describe on the cluster's groups to show which share groups dead-letter here"}}
	case err != nil && len(listed) == 0:
		return nil // a broker without share groups (before 4.0) has none to show
	}
	groups := listed.Groups()
	if len(groups) == 0 {
		return nil
	}
	cfgs, err := groupConfigs(ctx, t.cl, groups...)
	if err != nil {
		return []backend.DoctorCheck{{Name: "share groups", Detail: t.connErr(ctx, "group configs", err).Error(),
			Fix: "dlqctl needs DescribeConfigs on the share groups"}}
	}
	var mine []string
	for g, c := range cfgs {
		if c[GroupDLQTopic] == t.src.topic {
			mine = append(mine, g)
		}
	}
	sort.Strings(mine)
	var out []backend.DoctorCheck
	for _, g := range mine {
		out = append(out, t.shareGroupCheck(ctx, g, cfgs[g]))
	}
	return out
}

// shareGroupCheck is the doctor line of one share group that dead-letters
// here.
func (t *Topic) shareGroupCheck(ctx context.Context, group string, cfg map[string]string) backend.DoctorCheck {
	c := backend.DoctorCheck{Name: "share group " + group, OK: true}
	limit := cfg[GroupDeliveryLimit]
	if limit == "" {
		limit = "the broker's group.share.delivery.count.limit"
	}
	copyOn := cfg[GroupDLQCopyRecord] == "true"
	mode := "copy off: dead letters hold only headers, payloads are read back from the source"
	if copyOn {
		mode = "copy on: dead letters hold the key and value"
	}
	c.Detail = fmt.Sprintf("dead-letters here (%s); delivery limit %s", mode, limit)
	if copyOn {
		return c
	}
	offs, err := t.adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		c.Detail += "; its topics' retention unknown: " + t.connErr(ctx, "share group offsets", err).Error()
		return c
	}
	var topics []string
	for tp := range offs[group].Offsets {
		topics = append(topics, tp)
	}
	sort.Strings(topics)
	if len(topics) == 0 {
		return c
	}
	tc, err := t.adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		c.Detail += "; its topics' retention unknown: " + t.connErr(ctx, "topic configs", err).Error()
		return c
	}
	for _, tp := range topics {
		rc, err := tc.On(tp, nil)
		if err != nil {
			continue
		}
		for _, kv := range rc.Configs {
			if kv.Key != "retention.ms" || kv.Value == nil {
				continue
			}
			ms, err := strconv.ParseInt(*kv.Value, 10, 64)
			if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond >= shortRetention {
				continue
			}
			keep := (time.Duration(ms) * time.Millisecond).String()
			c.OK = false
			c.Detail += fmt.Sprintf("; %s keeps records for %s: a dead letter of it is redrivable only that long", tp, keep)
			c.Fix = fmt.Sprintf("turn copy on (kafka-configs.sh --alter --entity-type groups --entity-name %s --add-config %s=true), or redrive within %s", group, GroupDLQCopyRecord, keep)
		}
	}
	return c
}
