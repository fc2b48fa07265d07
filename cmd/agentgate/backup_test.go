package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/store/sqlite"
)

func TestBackupCommand(t *testing.T) {
	t.Setenv("AGENTGATE_DATABASE_URL", "")
	dir := t.TempDir()
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "agentgate.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	var out bytes.Buffer
	dest := filepath.Join(t.TempDir(), "copy.db")
	// FILE before the flags, as after them.
	if err := run(t.Context(), []string{"backup", dest, "--data-dir", dir}, strings.NewReader(""), &out, &out); err != nil || !strings.HasPrefix(out.String(), "backed up ") {
		t.Fatalf("backup: %v, %q", err, out.String())
	}
	if err := run(t.Context(), []string{"backup", "--data-dir", dir}, strings.NewReader(""), &out, &out); err == nil || exitCode(err) != 2 {
		t.Fatalf("backup without FILE: %v, want a usage error", err)
	}
	t.Setenv("AGENTGATE_DATABASE_URL", "postgres://127.0.0.1:1/x")
	if err := run(t.Context(), []string{"backup", dest + "2"}, strings.NewReader(""), &out, &out); err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("backup on PostgreSQL: %v, want the pg_dump way", err)
	}
}
