package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database at path to dest (VACUUM
// INTO: a snapshot, compacted), while a gateway may be using it: it reads
// through its own connection and takes no lock a writer waits on for long.
// dest must not exist. The copy holds everything the store does, so dest
// is readable by its owner only (0600): it is written in a private (0700)
// directory beside dest, checked, then moved to dest.
func Backup(ctx context.Context, path, dest string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("backup: no database at %s: %w", path, err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("backup: %s exists; give a new file name", dest)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	// VACUUM INTO creates its file with the umask (0644 usually) and will
	// not write into one created 0600 beforehand.
	tmpDir, err := os.MkdirTemp(filepath.Dir(dest), ".agentgate-backup-*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(tmpDir) // a partial copy is no backup
	tmp := filepath.Join(tmpDir, filepath.Base(dest))
	if err := vacuumInto(ctx, path, tmp); err != nil {
		return fmt.Errorf("backup %s to %s: %w", path, dest, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := integrityCheck(ctx, tmp); err != nil {
		return fmt.Errorf("backup: check the copy of %s: %w", path, err)
	}
	// A hard link does not replace a dest created meanwhile; a file system
	// without them gets a rename.
	if err := os.Link(tmp, dest); errors.Is(err, os.ErrExist) {
		return fmt.Errorf("backup: %s exists; give a new file name", dest)
	} else if err != nil {
		if err := os.Rename(tmp, dest); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
	return nil
}

// vacuumInto writes a compacted copy of the database at path to dest.
func vacuumInto(ctx context.Context, path, dest string) error {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, dest)
	return err
}

// integrityCheck opens the database at path read-only and checks it.
func integrityCheck(ctx context.Context, path string) error {
	check, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return err
	}
	defer check.Close()
	var ok string
	if err := check.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil {
		return err
	}
	if ok != "ok" {
		return fmt.Errorf("integrity check: %s", ok)
	}
	return nil
}
