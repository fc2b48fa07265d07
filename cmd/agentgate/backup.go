package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

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
	var file []string
	var rest []string
	for i := 0; i < len(args); i++ { // FILE may come before or after the flags
		switch a := args[i]; {
		case a == "-h" || a == "-help" || a == "--help":
			fmt.Fprint(stdout, backupHelp)
			return nil
		case a == "--data-dir" || a == "-data-dir":
			if i+1 < len(args) {
				rest = append(rest, a, args[i+1])
				i++
			} else {
				rest = append(rest, a)
			}
		case len(a) > 0 && a[0] == '-':
			rest = append(rest, a)
		default:
			file = append(file, a)
		}
	}
	if len(file) != 1 {
		fmt.Fprint(stderr, backupHelp)
		return &usageError{"backup: give one FILE to write the copy to"}
	}
	s, err := parseSettings("backup", rest, stderr)
	if err != nil {
		return err
	}
	if s.DatabaseURL != "" {
		return &usageError{"backup: the store is PostgreSQL (AGENTGATE_DATABASE_URL); use pg_dump: pg_dump --format=custom --file=agentgate.dump \"$AGENTGATE_DATABASE_URL\""}
	}
	src := filepath.Join(s.DataDir, "agentgate.db")
	if err := sqlite.Backup(ctx, src, file[0]); err != nil {
		return err
	}
	info, err := os.Stat(file[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%d bytes)\n", src, file[0], info.Size())
	return nil
}
