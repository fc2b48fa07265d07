package sqlite

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// The hot lookups find their rows through their index instead of reading
// the table: SQLite uses a partial index only when the query names its
// condition as the index does, and without it each lookup costs as much as
// the table is long — a keyed enqueue with a backlog of jobs, the routine
// scheduler's look with many routines, a finish or a decision while many
// approvals wait.
func TestLookupsUseTheirIndexes(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "db"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// The API's view of a paused run lists its pending approvals as every
	// list is paged (see sqlstore.PageAfter).
	var viewArgs sqlstore.Params
	viewArgs.Add(int64(0))
	view := `SELECT rowid FROM approvals WHERE rowid > ?` + sqlstore.ApprovalsWhere(
		core.ApprovalFilter{RunID: "run_1", Status: core.ApprovalPending}, &viewArgs) + ` ORDER BY rowid LIMIT ?`
	viewArgs.Add(51)
	for _, tc := range []struct {
		name, stmt string
		args       []any
		want       string
		sorts      int // sorts of a few rows the plan may have (the history's oldest-first order)
	}{
		{"coalescing enqueue", coalesceStmt, []any{int64(1), "ses_1"}, "USING INDEX jobs_key (key=?)", 0},
		{"a turn's history", historyStmt, []any{"ses_1", int64(10), 10},
			"SEARCH runs USING INDEX runs_session (session_id=? AND status=? AND rowid<?)", 1},
		{"a paused run's pending approvals", view, viewArgs, "INDEX approvals_pending (run_id=? AND rowid>?)", 0},
		{"due routines", sqlstore.DueRoutinesStmt, []any{int64(1), 100}, "INDEX routines_due", 0},
		{"next routine due", sqlstore.NextRoutineDueStmt, nil, "INDEX routines_due", 0},
		{"a finish cancels the run's pending approvals", cancelPendingStmt, []any{"", "", int64(1), "run_1"},
			"INDEX approvals_pending (run_id=?)", 0},
		{"a decision resumes the run when nothing else is pending", resumeStmt, []any{"run_1"},
			"INDEX approvals_pending (run_id=?)", 0},
	} {
		rows, err := db.r.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+tc.stmt, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(plan, "; "); !strings.Contains(got, tc.want) || strings.Count(got, "TEMP B-TREE") > tc.sorts {
			t.Errorf("%s: plan %q, want %q and at most %d sorts", tc.name, got, tc.want, tc.sorts)
		}
	}
}
