package redisstream

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

var _ core.Pruner = (*Queue)(nil)

// Prune removes up to limit jobs dead-lettered before before (the queue's
// clock at their death), oldest first; see core.Pruner. The queue keeps
// nothing else retention removes: an acked job is gone at once.
func (q *Queue) Prune(ctx context.Context, what core.Prunable, before time.Time, limit int) (int, error) {
	if what != core.PruneDeadJobs {
		return 0, nil
	}
	if limit <= 0 {
		return 0, fmt.Errorf("prune %s: limit must be positive, got %d", what, limit)
	}
	msgs, err := q.client.XRangeN(ctx, q.keys.dead, "-", "+", int64(limit)).Result()
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", what, err)
	}
	var ids []string
	for _, m := range msgs {
		var r record
		s, _ := m.Values["job"].(string)
		if json.Unmarshal([]byte(s), &r) == nil && r.DeadAt >= before.UnixMilli() {
			break // the stream is in the order they died
		}
		ids = append(ids, m.ID) // due, or unreadable: nothing could retry it
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := q.client.XDel(ctx, q.keys.dead, ids...).Result()
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", what, err)
	}
	return int(n), nil
}
