package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// LatestVersion is the newest migration this build carries.
func LatestVersion() int {
	return sqlstore.LatestMigration(migrationFS, "migrations")
}

// ErrBadURL is Inspect's error for a database URL it cannot parse. It does
// not quote the URL, which may hold a password.
var ErrBadURL = errors.New("postgres: database URL: cannot parse it; check its syntax and parameters " +
	"(postgres://user:password@host:port/dbname?sslmode=disable)")

// Inspect connects to url without changing anything and reports the schema's
// migration version and the database's clock (for a skew check).
func Inspect(ctx context.Context, url, schema string) (version int, now time.Time, err error) {
	if schema == "" {
		schema = "public"
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's error quotes the URL, redacting the password only on a best
		// effort basis: do not pass it on (as Open does not).
		return 0, now, ErrBadURL
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, now, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return 0, now, fmt.Errorf("postgres: %w", err)
	}
	version, err = currentVersion(ctx, conn)
	if err != nil {
		return 0, now, fmt.Errorf("postgres: schema version: %w", err)
	}
	return version, now, nil
}
