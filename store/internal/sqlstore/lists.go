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

// Args collects a statement's arguments in a driver's placeholder syntax.
type Args interface {
	// Add appends v and returns its placeholder.
	Add(v any) string
	// In returns the condition that column col is one of vs.
	In(col string, vs []string) string
}

// SessionsWhere is filter f as SQL conditions, each starting with " AND ".
func SessionsWhere(f core.SessionFilter, a Args) string {
	var q string
	if f.UserID != "" {
		q += ` AND user_id = ` + a.Add(f.UserID)
	}
	if f.AgentID != "" {
		q += ` AND agent_id = ` + a.Add(f.AgentID)
	}
	if len(f.AgentIDs) > 0 {
		q += ` AND ` + a.In("agent_id", f.AgentIDs)
	}
	return q
}

// RunsWhere is filter f as SQL conditions, each starting with " AND ".
func RunsWhere(f core.RunFilter, a Args) string {
	var q string
	if f.SessionID != "" {
		q += ` AND session_id = ` + a.Add(f.SessionID)
	}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			statuses[i] = string(s)
		}
		q += ` AND ` + a.In("status", statuses)
	}
	return q
}

// ApprovalsWhere is filter f as SQL conditions, each starting with " AND ".
func ApprovalsWhere(f core.ApprovalFilter, a Args) string {
	var q string
	switch f.Status {
	case "":
	case core.ApprovalPending:
		// Named as the partial index approvals_pending names it, so that a
		// run's pending approvals are looked up through it.
		q += ` AND status = 'pending'`
	default:
		q += ` AND status = ` + a.Add(string(f.Status))
	}
	if f.RunID != "" {
		q += ` AND run_id = ` + a.Add(f.RunID)
	}
	if len(f.AgentIDs) > 0 {
		q += ` AND run_id IN (SELECT id FROM runs WHERE ` + a.In("agent_id", f.AgentIDs) + `)`
	}
	if b := f.Conversation; b != nil {
		q += ` AND session_id IN (SELECT id FROM sessions WHERE platform = ` + a.Add(b.Platform) +
			` AND channel = ` + a.Add(b.Channel) + ` AND (` + a.Add(b.Workspace) + ` = '' OR workspace = '' OR workspace = ` +
			a.Add(b.Workspace) + `))`
	}
	return q
}

// RoutinesWhere is filter f as SQL conditions, each starting with " AND ".
func RoutinesWhere(f core.RoutineFilter, a Args) string {
	if len(f.AgentIDs) > 0 {
		return ` AND ` + a.In("agent_id", f.AgentIDs)
	}
	return ""
}
