package sqlite_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/store/routinetest"
	"github.com/agentgate/agentgate/store/sqlite"
)

func TestRoutines(t *testing.T) {
	routinetest.Run(t, func(t *testing.T) routinetest.Harness {
		db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
		return routinetest.Harness{Routines: db, Store: db, Queue: db}
	})
}
