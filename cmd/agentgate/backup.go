package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentgate/agentgate/store/sqlite"
)

const backupHelp = `Usage: agentgate backup [--data-dir DIR] FILE

Writes a consistent copy of the embedded SQLite store (DIR/agentgate.db) to
FILE, which must not exist, while a gateway may be serving from it. Restore
by stopping the gateway and putting FILE back as DIR/agentgate.db (with the
blobs/ directory beside it, copied as files).

On PostgreSQL (AGENTGATE_DATABASE_URL set), back up with pg_dump instead:
  pg_dump --format=custom --file=agentgate.dump "$AGENTGATE_DATABASE_URL"
`

// backupCmd runs `agentgate backup`.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fmt.Fprint(stdout, backupHelp)
		return nil
	}
	s, err := parseSettings("backup", reorder(args), stderr) // FILE may come before or after the flags
	if err != nil {
		return err
	}
	if len(s.args) != 1 {
		fmt.Fprint(stderr, backupHelp)
		return &usageError{"backup: give one FILE to write the copy to"}
	}
	file := s.args[0]
	if s.DatabaseURL != "" {
		return &usageError{"backup: the store is PostgreSQL (AGENTGATE_DATABASE_URL); use pg_dump: pg_dump --format=custom --file=agentgate.dump \"$AGENTGATE_DATABASE_URL\""}
	}
	src := filepath.Join(s.DataDir, "agentgate.db")
	if err := sqlite.Backup(ctx, src, file); err != nil {
		return err
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%d bytes)\n", src, file, info.Size())
	return nil
}
