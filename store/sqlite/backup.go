package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
)

// Backup writes a consistent copy of the database at path to dest (VACUUM
// INTO: a snapshot, compacted), while a gateway may be using it: it reads
// through its own connection and takes no lock a writer waits on for long.
// dest must not exist.
func Backup(ctx context.Context, path, dest string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("backup: no database at %s: %w", path, err)
	}
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("backup: %s exists; give a new file name", dest)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		os.Remove(dest) // a partial copy is no backup
		return fmt.Errorf("backup %s to %s: %w", path, dest, err)
	}
	var ok string
	check, err := sql.Open("sqlite", dest+"?_pragma=query_only(1)")
	if err != nil {
		return fmt.Errorf("backup: check %s: %w", dest, err)
	}
	defer check.Close()
	if err := check.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("backup: %s fails its integrity check: %v %s", dest, err, ok)
	}
	return nil
}
