package sqlite_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/core/lease/leasetest"
	"github.com/agentgate/agentgate/store/sqlite"
)

func TestLeases(t *testing.T) {
	leasetest.Run(t, func(t *testing.T, clock *leasetest.Clock) lease.Store {
		db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
