package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// LatestVersion is the newest migration this build carries.
func LatestVersion() int { return sqlstore.LatestMigration(migrationFS, "migrations") }

// Inspect reads the migration version of the database at path without
// changing it; 0 when there is no database yet.
func Inspect(ctx context.Context, path string) (int, error) {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return 0, nil
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlite: schema version of %s: %w", path, err)
	}
	return v, nil
}
