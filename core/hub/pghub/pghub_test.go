package pghub_test

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/hub/hubtest"
	"github.com/agentgate/agentgate/core/hub/pghub"
)

func TestBridge(t *testing.T) {
	dbURL := os.Getenv("AGENTGATE_TEST_DATABASE_URL")
	if dbURL == "" {
		t.Skip("AGENTGATE_TEST_DATABASE_URL is unset (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable); skipping the PostgreSQL hub test")
	}
	log := slog.New(slog.DiscardHandler)
	hubtest.Run(t, func(t *testing.T) hubtest.Join {
		schema := "hub_" + core.NewID("t")[2:]
		return func(t *testing.T, hub *core.Hub) hubtest.Bridge {
			// The replica's connections carry a name of their own, so Cut
			// finds them and no one else's.
			name := core.NewID("pghub")
			return hubtest.Bridge{
				Run: pghub.Bridge(withAppName(t, dbURL, name), schema, hub, log),
				Cut: func() int { return terminate(t, dbURL, name) },
			}
		}
	})
}

// withAppName returns dbURL with application_name set to name.
func withAppName(t *testing.T, dbURL, name string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("AGENTGATE_TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// terminate ends the server side of every connection named name and returns
// how many it ended.
func terminate(t *testing.T, dbURL, name string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	// The pids first: in one WHERE, PostgreSQL may call
	// pg_terminate_backend before it has filtered by name.
	rows, _ := conn.Query(t.Context(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, name)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatalf("list connections of %s: %v", name, err)
	}
	var n int
	for _, pid := range pids {
		var ended bool
		if err := conn.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ended); err != nil {
			t.Fatalf("terminate %s (pid %d): %v", name, pid, err)
		}
		if ended {
			n++
		}
	}
	return n
}
