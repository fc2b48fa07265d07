package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// A backup taken while the store is open and written holds what was
// committed, and opens as a store.
func TestBackupWhileOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agentgate.db")
	db, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, err := db.CreateRun(t.Context(), core.NewRun{
		Session: core.Session{ID: "ses_b", AgentID: "ops"},
		Run:     core.Run{ID: "run_b", SessionID: "ses_b", AgentID: "ops", Input: "keep me", CreatedAt: time.Now()},
	})
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "backup.db")
	if err := sqlite.Backup(t.Context(), path, dest); err != nil {
		t.Fatal(err)
	}
	// The copy holds the whole journal: its owner's only, and nothing else
	// left beside it.
	fi, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("backup file mode %v, want %v", got, os.FileMode(0o600))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".agentgate-backup-*")); len(left) > 0 {
		t.Errorf("backup left %v", left)
	}
	if err := sqlite.Backup(t.Context(), path, dest); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("a second backup to the same file = %v, want a refusal", err)
	}
	restored, err := sqlite.Open(t.Context(), dest, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	got, err := restored.GetRun(t.Context(), run.ID)
	if err != nil || got.Input != "keep me" {
		t.Fatalf("run in the backup = %+v, %v", got, err)
	}
	if err := sqlite.Backup(t.Context(), filepath.Join(dir, "nope.db"), filepath.Join(dir, "b2.db")); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("backup of a missing database = %v", err)
	}
}
