package sqlstore

import (
	"fmt"
	"strconv"

	"github.com/agentgate/agentgate/core"
)

// PageLimit applies core.ListOptions' default (50) and cap (500).
func PageLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}

// ParseCursor reads a list cursor: the row number of the last item of the
// previous page ("" = from the start).
func ParseCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cursor %q: %w", c, core.ErrInvalidCursor)
	}
	return n, nil
}

// RunCounts is the number of runs by status (from counts by status name),
// with every known status present.
func RunCounts(counts map[string]int64) map[core.RunStatus]int64 {
	m := map[core.RunStatus]int64{}
	for _, s := range []core.RunStatus{core.RunQueued, core.RunRunning, core.RunPaused, core.RunCompleted, core.RunFailed, core.RunCancelled} {
		m[s] = 0
	}
	for s, n := range counts {
		m[core.RunStatus(s)] = n
	}
	return m
}

// ApprovalCounts is the number of approvals by status, with every known
// status present.
func ApprovalCounts(counts map[string]int64) map[core.ApprovalStatus]int64 {
	m := map[core.ApprovalStatus]int64{}
	for _, s := range []core.ApprovalStatus{core.ApprovalPending, core.ApprovalApproved, core.ApprovalDenied, core.ApprovalExpired, core.ApprovalCancelled} {
		m[s] = 0
	}
	for s, n := range counts {
		m[core.ApprovalStatus(s)] = n
	}
	return m
}
