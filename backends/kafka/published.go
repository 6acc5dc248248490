package kafkadlq

import (
	"context"

	"github.com/dlqctl/dlqctl/backend"
)

var _ backend.PublishedChecker = (*Topic)(nil)

// CheckPublished answers from the state topic, whose records commit in the
// same transaction as the records put back on the destination: an entry
// run m redrove has a state record naming m's run ID and the entry's
// sequence (found); one that another run redrove, one resolved (never
// published), or one that no state record takes out of the DLQ was not
// put there by m (absent); a state record from before run IDs were
// recorded cannot tell (unknown).
// A resume that finds entries gone that its journal never saw moved
// counts them as moved by its own run only when they were.
func (t *Topic) CheckPublished(ctx context.Context, queries []backend.PublishedQuery, m backend.Markers) ([]backend.Presence, error) {
	st, err := t.loadState(ctx, true)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Presence, len(queries))
	for i, q := range queries {
		rec, ok := st.done.get(q.Item.ID)
		switch {
		case !ok, rec.Status != StatusRedriven, rec.TopicID != "" && t.topicID != "" && rec.TopicID != t.topicID:
			out[i] = backend.PresenceAbsent
		case rec.RunID == "":
			out[i] = backend.PresenceUnknown
		case rec.RunID == m.RunID && rec.Seq == q.Item.Seq:
			out[i] = backend.PresenceFound
		default:
			out[i] = backend.PresenceAbsent
		}
	}
	return out, nil
}
