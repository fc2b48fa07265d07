package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/postgres"
)

// latest is the newest migration in migrations/.
const latest = 14

// tablesAt are the tables of the schema at each version.
var tablesAt = [latest + 1][]string{
	0:  {"schema_migrations"},
	1:  {"approvals", "jobs", "run_events", "runs", "schema_migrations", "sessions"},
	2:  {"approvals", "jobs", "leases", "run_events", "runs", "schema_migrations", "sessions"},
	3:  {"approvals", "jobs", "leases", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	4:  {"approvals", "jobs", "leases", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	5:  {"approvals", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	6:  {"approvals", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	7:  {"approvals", "audit", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	8:  {"approvals", "audit", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	9:  {"approvals", "audit", "blobs", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	10: {"approvals", "audit", "blobs", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	11: {"approvals", "audit", "blobs", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	12: {"approvals", "audit", "blobs", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	13: {"approvals", "audit", "blobs", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
	14: {"approvals", "audit", "blobs", "inbox", "jobs", "leases", "outbox", "routine_history", "routines", "run_events", "runs", "schema_migrations", "sessions"},
}

func wantVersion(t *testing.T, db *postgres.DB, want int) {
	t.Helper()
	v, err := db.SchemaVersion(t.Context())
	if err != nil {
		t.Fatalf("SchemaVersion: %v", err)
	}
	if v != want {
		t.Fatalf("SchemaVersion = %d, want %d", v, want)
	}
}

// tables lists the tables of schema.
func tables(t *testing.T, url, schema string) []string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(t.Context(), `SELECT table_name::text FROM information_schema.tables
		WHERE table_schema = $1 ORDER BY table_name COLLATE "C"`, schema)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// useEveryTable writes to and reads from the tables of every migration: a
// run, an inbox message, a lease, a routine with a fired run and an audit entry.
func useEveryTable(t *testing.T, db *postgres.DB) {
	t.Helper()
	ctx := t.Context()
	sid := core.NewID("ses")
	r, err := db.CreateRun(ctx, core.NewRun{
		Session: core.Session{ID: sid, AgentID: "agent"},
		Run:     core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "agent", Type: core.RunTypeChat},
	})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if _, err := db.GetRun(ctx, r.ID); err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	now := time.Now()
	if n, err := db.AppendInbox(ctx, []core.InboxMessage{{Platform: "slack", Key: "msg:C1:1.0001", Payload: []byte(`{}`), ReceivedAt: now}}); err != nil || n != 1 {
		t.Fatalf("AppendInbox = %d, %v; want 1 added", n, err)
	}
	if msgs, err := db.ClaimInbox(ctx, "slack", "node-1", now, now.Add(time.Minute), 10); err != nil || len(msgs) != 1 {
		t.Fatalf("ClaimInbox = %+v, %v; want the appended message", msgs, err)
	}
	if ok, err := db.AcquireLease(ctx, "tick", "node-1", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease = %t, %v; want the free lease", ok, err)
	}
	if err := db.ReleaseLease(ctx, "tick", "node-1"); err != nil {
		t.Fatalf("ReleaseLease: %v", err)
	}
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	if err := db.SyncRoutines(ctx, []core.RoutineDef{{ID: "digest", AgentID: "agent", Schedule: "@every 1h",
		Timezone: "UTC", DeliverTo: "none", Enabled: true, Missed: core.MissedSkip, NextFireAt: t0}}, t0); err != nil {
		t.Fatalf("SyncRoutines: %v", err)
	}
	rid := core.NewID("run")
	if _, err := db.FireRoutine(ctx, core.RoutineFire{RoutineID: "digest", Expected: t0, Next: t0.Add(time.Hour), At: t0,
		Runs: []core.FireRun{{Kind: core.FireScheduled, DueAt: t0, Run: core.NewRun{
			Session: core.Session{ID: "agent:routine:digest", AgentID: "agent"},
			Run: core.Run{ID: rid, SessionID: "agent:routine:digest", AgentID: "agent", Type: core.RunTypeRoutine,
				RoutineID: "digest", CreatedAt: t0},
		}}}}); err != nil {
		t.Fatalf("FireRoutine: %v", err)
	}
	if p, err := db.RoutineHistory(ctx, "digest", core.ListOptions{}); err != nil || len(p.Items) != 1 || p.Items[0].RunID != rid {
		t.Fatalf("RoutineHistory = %+v, %v; want the fired run", p.Items, err)
	}
	if err := db.AppendAudit(ctx, core.AuditEntry{Principal: "key:ci", Route: "api", Action: core.AuditTrigger, Target: "digest"}); err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	if p, err := db.ListAudit(ctx, core.AuditFilter{Target: "digest"}); err != nil || len(p.Items) != 1 || p.Items[0].Principal != "key:ci" {
		t.Fatalf("ListAudit = %+v, %v; want the appended entry", p.Items, err)
	}
}

// TestMigrateUpDownUp migrates a schema up, down one version at a time to
// nothing, and up again; the store works before and after.
func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	ctx := t.Context()
	db := openDB(t, url, schema, postgres.Options{})
	wantVersion(t, db, latest)
	if got := tables(t, url, schema); !slices.Equal(got, tablesAt[latest]) {
		t.Errorf("tables after Open = %v, want %v", got, tablesAt[latest])
	}
	useEveryTable(t, db)
	runs, err := db.ListRuns(ctx, core.RunFilter{})
	if err != nil || len(runs.Items) != 2 {
		t.Fatalf("ListRuns = %d runs, %v; want 2", len(runs.Items), err)
	}

	// Migrate again: nothing to do.
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	wantVersion(t, db, latest)
	if _, err := db.GetRun(ctx, runs.Items[0].ID); err != nil {
		t.Fatalf("GetRun after a no-op Migrate: %v", err)
	}

	for to := latest - 1; to >= 0; to-- {
		if err := db.MigrateDown(ctx, to); err != nil {
			t.Fatalf("MigrateDown(%d): %v", to, err)
		}
		wantVersion(t, db, to)
		if got := tables(t, url, schema); !slices.Equal(got, tablesAt[to]) {
			t.Errorf("tables after MigrateDown(%d) = %v, want %v", to, got, tablesAt[to])
		}
	}
	if _, err := db.GetRun(ctx, runs.Items[0].ID); err == nil {
		t.Error("GetRun after MigrateDown(0): want an error (no runs table)")
	}

	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after MigrateDown: %v", err)
	}
	wantVersion(t, db, latest)
	if got := tables(t, url, schema); !slices.Equal(got, tablesAt[latest]) {
		t.Errorf("tables after the round trip = %v, want %v", got, tablesAt[latest])
	}
	if _, err := db.GetRun(ctx, runs.Items[0].ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("GetRun of a run from before the round trip: err = %v, want ErrNotFound", err)
	}
	if _, err := db.GetRoutine(ctx, "digest"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("GetRoutine of a routine from before the round trip: err = %v, want ErrNotFound", err)
	}
	useEveryTable(t, db)
	if err := db.MigrateDown(ctx, -1); err == nil {
		t.Error("MigrateDown(-1): want an error")
	}
}

// TestMigrateInboxFirst: migration 6 keeps the messages that started runs
// as processed; reverting it drops the messages still waiting.
func TestMigrateInboxFirst(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	ctx := t.Context()
	db := openDB(t, url, schema, postgres.Options{})
	if err := db.MigrateDown(ctx, 5); err != nil {
		t.Fatalf("MigrateDown(5): %v", err)
	}
	if err := adminExec(ctx, url, `INSERT INTO `+pgx.Identifier{schema, "inbox"}.Sanitize()+
		` (platform, dedupe_key, run_id, created_at) VALUES ('slack', 'msg:C1:1.0001', 'run_old', now())`); err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	sid := core.NewID("ses")
	_, err := db.CreateRun(ctx, core.NewRun{
		Session:  core.Session{ID: sid, AgentID: "agent"},
		Run:      core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "agent", Type: core.RunTypeChat},
		Platform: "slack", DedupeKey: "msg:C1:1.0001",
	})
	var dup *core.DuplicateError
	if !errors.As(err, &dup) || dup.RunID != "run_old" {
		t.Fatalf("CreateRun of a message from before the migration = %v, want a duplicate of run_old", err)
	}
	now := time.Now()
	if n, err := db.AppendInbox(ctx, []core.InboxMessage{{Platform: "slack", Key: "msg:C1:1.0002", ReceivedAt: now}}); err != nil || n != 1 {
		t.Fatalf("AppendInbox = %d, %v", n, err)
	}
	if err := db.MigrateDown(ctx, 5); err != nil {
		t.Fatalf("MigrateDown(5): %v", err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if msgs, err := db.ClaimInbox(ctx, "slack", "n1", now, now.Add(time.Minute), 10); err != nil || len(msgs) != 0 {
		t.Errorf("ClaimInbox after a round trip = %+v, %v; want nothing (waiting messages are dropped)", msgs, err)
	}
}

// TestOpenConcurrently: replicas that start together on a schema that does
// not exist yet migrate it once, one after the other.
func TestOpenConcurrently(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := schemaName(t, url) // Migrate creates it
	const replicas = 4
	dbs := make([]*postgres.DB, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			dbs[i], errs[i] = postgres.Open(t.Context(), url, postgres.Options{Schema: schema, Logger: quiet, MaxConns: 2})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Open: %v", i, err)
			continue
		}
		t.Cleanup(func() { dbs[i].Close() })
	}
	if t.Failed() {
		t.FailNow()
	}
	wantVersion(t, dbs[0], latest)
	var applied int
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(t.Context(), `SELECT COUNT(*) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).
		Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != latest {
		t.Errorf("schema_migrations has %d rows, want %d", applied, latest)
	}
}

func TestOpenSkipMigrate(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	db := openDB(t, url, schema, postgres.Options{SkipMigrate: true})
	wantVersion(t, db, 0)
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	wantVersion(t, db, latest)
}

// TestOpenRejects needs no database: Open refuses bad input before
// connecting.
func TestOpenRejects(t *testing.T) {
	t.Parallel()
	const url = "postgres://user:s3cret@127.0.0.1:1/db"
	tests := []struct {
		name string
		url  string
		opts postgres.Options
		want string
	}{
		{"bad URL", "postgres://user:s3cret@host:notaport/db", postgres.Options{}, "database URL"},
		{"schema longer than an identifier", url, postgres.Options{Schema: strings.Repeat("s", 64)}, "at most 63 bytes"},
		{"negative max conns", url, postgres.Options{MaxConns: -1}, "max conns"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := postgres.Open(t.Context(), tc.url, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: err = %v, want one about %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
