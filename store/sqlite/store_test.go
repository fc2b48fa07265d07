package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/store/sqlite"
	"github.com/agentgate/agentgate/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
		return storetest.Harness{Store: db, Queue: db}
	})
}
