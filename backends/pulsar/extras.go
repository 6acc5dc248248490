package pulsardlq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// PulsarExtras is the Pulsar section of `stats` (dlqctl.stats/v1 backend):
// the DLQ subscription as the broker reports it (topic stats, summed over
// partitions).
type PulsarExtras struct {
	Topic        string `json:"topic"`
	Subscription string `json:"subscription"`
	// Partitions is 0 for a non-partitioned topic.
	Partitions int `json:"partitions"`
	// Backlog is msgBacklog: entries not acknowledged (a batch counts once).
	Backlog          int64   `json:"backlog"`
	BacklogBytes     int64   `json:"backlog_bytes"`
	MsgRateOut       float64 `json:"msg_rate_out"`
	MsgRateRedeliver float64 `json:"msg_rate_redeliver"`
	UnackedMessages  int64   `json:"unacked_messages"`
	Consumers        int     `json:"consumers"`
	// Type is the subscription type ("None" when no consumer is connected).
	Type string `json:"type"`
	// EarliestBacklogPublishTime is the publish time of the oldest
	// unacknowledged message, when the broker tracks it.
	EarliestBacklogPublishTime string `json:"earliest_backlog_publish_time,omitempty"`
	// CameBack counts entries in the backlog that dlqctl acknowledged and
	// recorded as removed, brought back by a broker crash; not in total.
	CameBack int `json:"came_back"`
}

// Extras reports the DLQ subscription's backlog, rates and consumers.
func (t *Topic) Extras(ctx context.Context, _ []string) (backend.ExtraStats, error) {
	ss, err := t.subStats(ctx)
	if err != nil {
		return backend.ExtraStats{}, err
	}
	t.mu.Lock()
	n := t.partitions
	t.mu.Unlock()
	x := PulsarExtras{
		Topic: t.topic.String(), Subscription: t.sub, Partitions: n,
		Backlog: ss.MsgBacklog, BacklogBytes: ss.BacklogSize,
		MsgRateOut: ss.MsgRateOut, MsgRateRedeliver: ss.MsgRateRedeliver,
		UnackedMessages: ss.UnackedMessages, Consumers: len(ss.Consumers), Type: ss.Type,
	}
	if ss.EarliestMsgPublishTimeInBacklog > 0 {
		x.EarliestBacklogPublishTime = time.UnixMilli(ss.EarliestMsgPublishTimeInBacklog).UTC().Format(time.RFC3339)
	}
	rows := [][2]string{
		{"subscription", t.sub + " on " + x.Topic + partitionsNote(n)},
		{"backlog", strconv.FormatInt(x.Backlog, 10) + " entries (" + strconv.FormatInt(x.BacklogBytes, 10) + " bytes)"},
		{"consumers", fmt.Sprintf("%d (%s), %d unacked", x.Consumers, x.Type, x.UnackedMessages)},
		{"rates", fmt.Sprintf("out %.2f msg/s, redeliver %.2f msg/s", x.MsgRateOut, x.MsgRateRedeliver)},
	}
	if x.CameBack, err = t.CameBack(ctx); err != nil {
		return backend.ExtraStats{}, err
	}
	if x.CameBack > 0 {
		rows = append(rows, [2]string{"came back", cameBackNote(x.CameBack)})
	}
	if x.EarliestBacklogPublishTime != "" {
		rows = append(rows, [2]string{"oldest in backlog", x.EarliestBacklogPublishTime})
	}
	return backend.ExtraStats{JSON: x, Title: "Pulsar DLQ subscription", Rows: rows}, nil
}

func partitionsNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d partitions)", n)
}
