package sqlite

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// A keyed enqueue finds the waiting job it joins through jobs_key instead of
// reading every live job: with a backlog, each enqueue would cost as much as
// the backlog is long.
func TestCoalesceUsesTheKeyIndex(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "db"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rows, err := db.r.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+coalesceStmt, int64(1), "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "USING INDEX jobs_key (key=?)") {
		t.Fatalf("coalescing enqueue plan = %q, want a search of jobs_key", got)
	}
}
