package postgres_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/store/postgres"
)

// Every turn reads its session's history. With 5,000 completed runs in
// other sessions and no statistics (a new table, autovacuum off or behind),
// the planner chose runs_status and read all of them on each turn; the
// lookup must go through runs_history whatever the statistics say, in the
// plan pgx's prepared statement gets first (custom) and later (generic).
func TestHistoryUsesItsIndex(t *testing.T) {
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
	if _, err := conn.Exec(t.Context(), `
		INSERT INTO sessions (id, agent_id, created_at, updated_at)
			SELECT 'ses_' || i, 'a', now(), now() FROM generate_series(1, 5000) i;
		INSERT INTO runs (id, session_id, agent_id, run_type, status, created_at)
			SELECT 'run_' || i, 'ses_' || i, 'a', 'api', 'completed', now() FROM generate_series(1, 5000) i;
		INSERT INTO sessions (id, agent_id, created_at, updated_at) VALUES ('ses_new', 'a', now(), now());
		INSERT INTO runs (id, session_id, agent_id, run_type, status, created_at)
			VALUES ('run_new', 'ses_new', 'a', 'api', 'running', now())`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stmt, args string
	}{
		{"a turn's history", postgres.RunHistoryStmt, `('run_new', 10)`},
		{"a session's history", postgres.SessionHistoryStmt, `('ses_new', '', 10)`},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := conn.Exec(t.Context(), `SET plan_cache_mode = `+mode+`; DEALLOCATE ALL; PREPARE p AS `+tc.stmt); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			rows, err := conn.Query(t.Context(), `EXPLAIN EXECUTE p`+tc.args, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "runs_history") || strings.Contains(plan, "runs_status") {
				t.Errorf("%s (%s) does not go through runs_history:\n%s", tc.name, mode, plan)
			}
		}
	}
}
