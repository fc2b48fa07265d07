package postgres_test

import (
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
	"github.com/agentgate/agentgate/store/postgres"
)

func TestQueue(t *testing.T) {
	url := testURL(t)
	queuetest.Run(t, func(t *testing.T, clock *queuetest.FakeClock) (core.Queue, func() core.Queue) {
		schema := newSchema(t, url)
		opts := postgres.Options{
			Clock:        clock,
			Logger:       quiet,
			MaxAttempts:  5,
			Backoff:      postgres.DefaultBackoff,
			PollInterval: 10 * time.Millisecond,
			Schema:       schema,
			MaxConns:     6,
		}
		open := func() *postgres.DB {
			t.Helper()
			db, err := postgres.Open(t.Context(), url, opts)
			if err != nil {
				t.Fatalf("open schema %s: %v", schema, err)
			}
			return db
		}
		db := open()
		t.Cleanup(func() { db.Close() })
		reopen := func() core.Queue {
			if err := db.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			db = open()
			return db
		}
		return db, reopen
	})
}

// TestQueuePeers runs the suite of handles that share a schema, as
// replicas do; a job one enqueues wakes another's Dequeue through NOTIFY.
func TestQueuePeers(t *testing.T) {
	url := testURL(t)
	queuetest.RunPeers(t, func(t *testing.T, clock *queuetest.FakeClock) func() (core.Queue, <-chan struct{}) {
		schema := newSchema(t, url)
		return func() (core.Queue, <-chan struct{}) {
			db := openDB(t, url, schema, postgres.Options{
				Clock:        clock,
				MaxAttempts:  5,
				Backoff:      postgres.DefaultBackoff,
				PollInterval: time.Hour,
				MaxConns:     8,
			})
			return db, db.ListenerReady()
		}
	})
}
