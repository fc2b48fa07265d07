package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
	"github.com/agentgate/agentgate/store/postgres"
)

// The hot lookups go through the index that answers them whatever the
// statistics say. With 5,000 runs and approvals and no statistics (a new
// table, autovacuum off or behind), the planner read a turn's history
// through runs_status (every completed run of the table) and a run's
// pending approvals through approvals_due or approvals_status (every
// pending approval); each turn, finish or decision cost as much as the
// table was long. Checked in the plan pgx's prepared statement gets first
// (custom) and later (generic).
func TestLookupsUseTheirIndexes(t *testing.T) {
	url := testURL(t)
	schema := newSchema(t, url)
	openDB(t, url, schema, postgres.Options{}) // migrates
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(t.Context()) })
	if _, err := conn.Exec(t.Context(), `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	explain := func(stmt, args, mode string) string {
		t.Helper()
		if _, err := conn.Exec(t.Context(), `SET plan_cache_mode = `+mode+`; DEALLOCATE ALL; PREPARE p AS `+stmt); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(t.Context(), `EXPLAIN EXECUTE p`+args, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	// The API's view of a paused run lists its pending approvals as every
	// list is paged (see sqlstore.PageAfter), with the filter's values as
	// parameters.
	var viewArgs sqlstore.Params
	view := `SELECT pk, ` + sqlstore.ApprovalCols + ` FROM approvals WHERE pk > ` + viewArgs.Add(0) + sqlstore.ApprovalsWhere(
		core.ApprovalFilter{RunID: "run_p7", Status: core.ApprovalPending}, &viewArgs) + ` ORDER BY pk LIMIT ` + viewArgs.Add(51)
	values := make([]string, len(viewArgs))
	for i, v := range viewArgs {
		view = strings.Replace(view, "?", fmt.Sprintf("$%d", i+1), 1)
		if values[i] = fmt.Sprint(v); i > 0 && i < len(viewArgs)-1 {
			values[i] = `'` + values[i] + `'`
		}
	}
	viewArgsText := `(` + strings.Join(values, ", ") + `)`
	// A generic plan made while the table is still empty (autovacuum off
	// keeps it) lists them through approvals_pending too: it is ordered by
	// pk as the list is.
	if plan := explain(view, viewArgsText, "force_generic_plan"); !strings.Contains(plan, "approvals_pending") {
		t.Errorf("a paused run's pending approvals, planned on empty tables, do not go through approvals_pending:\n%s", plan)
	}
	// 5,000 sessions with a completed run and a paused one waiting on an
	// approval each, and a new session with a running run.
	if _, err := conn.Exec(t.Context(), `
		INSERT INTO sessions (id, agent_id, created_at, updated_at)
			SELECT 'ses_' || i, 'a', now(), now() FROM generate_series(1, 5000) i;
		INSERT INTO runs (id, session_id, agent_id, run_type, status, created_at)
			SELECT 'run_' || i, 'ses_' || i, 'a', 'api', 'completed', now() FROM generate_series(1, 5000) i;
		INSERT INTO runs (id, session_id, agent_id, run_type, status, created_at)
			SELECT 'run_p' || i, 'ses_' || i, 'a', 'api', 'paused', now() FROM generate_series(1, 5000) i;
		INSERT INTO approvals (id, run_id, session_id, tool_call_id, tool, arguments, args_sha256, policy, status,
				created_at, expires_at)
			SELECT 'apr_' || i, 'run_p' || i, 'ses_' || i, 'call_1', 'deploy', '{}', '', '{}', 'pending',
				now(), now() + interval '1 hour' FROM generate_series(1, 5000) i;
		INSERT INTO sessions (id, agent_id, created_at, updated_at) VALUES ('ses_new', 'a', now(), now());
		INSERT INTO runs (id, session_id, agent_id, run_type, status, created_at)
			VALUES ('run_new', 'ses_new', 'a', 'api', 'running', now())`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stmt, args, want, not string
	}{
		{"a paused run's pending approvals", view, viewArgsText,
			"approvals_pending", "approvals_status"},
		{"a turn's history", postgres.RunHistoryStmt, `('run_new', 10)`, "runs_history", "runs_status"},
		{"a session's history", postgres.SessionHistoryStmt, `('ses_new', '', 10)`, "runs_history", "runs_status"},
		{"a finish cancels the run's pending approvals", postgres.CancelPendingStmt, `('', '', now(), 'run_p7')`,
			"approvals_pending", "approvals_due"},
		{"a decision resumes the run when nothing else is pending", postgres.ResumeStmt, `('apr_7')`,
			"approvals_pending", "approvals_status"},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if plan := explain(tc.stmt, tc.args, mode); !strings.Contains(plan, tc.want) || strings.Contains(plan, tc.not) {
				t.Errorf("%s (%s) does not go through %s alone:\n%s", tc.name, mode, tc.want, plan)
			}
		}
	}
}
