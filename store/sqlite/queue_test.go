package sqlite_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
	"github.com/agentgate/agentgate/store/sqlite"
)

// TestQueue runs the conformance suite. queuetest.RunPeers does not apply:
// one process owns a data directory (the gateway locks it), and a job
// another handle enqueued would be noticed only by polling.
func TestQueue(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, clock *queuetest.FakeClock) (core.Queue, func() core.Queue) {
		path := filepath.Join(t.TempDir(), "db.sqlite")
		open := func() *sqlite.DB {
			t.Helper()
			db, err := sqlite.Open(t.Context(), path, sqlite.Options{
				Clock:        clock,
				Logger:       quiet,
				Synchronous:  "normal",
				MaxAttempts:  5,
				Backoff:      sqlite.DefaultBackoff,
				PollInterval: 10 * time.Millisecond,
			})
			if err != nil {
				t.Fatalf("open %s: %v", path, err)
			}
			return db
		}
		db := open()
		t.Cleanup(func() { db.Close() })
		reopen := func() core.Queue {
			if err := db.Close(); err != nil {
				t.Fatalf("close %s: %v", path, err)
			}
			db = open()
			return db
		}
		return db, reopen
	})
}

// quiet drops the migration log lines.
var quiet = slog.New(slog.DiscardHandler)

func openQueue(tb testing.TB, opts sqlite.Options) *sqlite.DB {
	tb.Helper()
	opts.Logger = quiet
	path := filepath.Join(tb.TempDir(), "db.sqlite")
	db, err := sqlite.Open(tb.Context(), path, opts)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkQueueEnqueueDequeueAck measures one job's full round trip
// (three write transactions) on the real clock.
func BenchmarkQueueEnqueueDequeueAck(b *testing.B) {
	for _, sync := range []string{"full", "normal"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			db := openQueue(b, sqlite.Options{Synchronous: sync})
			ctx := b.Context()
			payload := json.RawMessage(`{"run_id":"run_0123456789abcdef"}`)
			for b.Loop() {
				if err := db.Enqueue(ctx, core.Job{Kind: "run", Payload: payload}); err != nil {
					b.Fatal(err)
				}
				j, ok, err := db.TryDequeue(ctx, "bench", time.Minute)
				if err != nil || !ok {
					b.Fatalf("TryDequeue = %v, %v", ok, err)
				}
				if err := db.Ack(ctx, j); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeyedEnqueueBehindBacklog measures a keyed enqueue (a session's
// run job) while 10,000 jobs of other keys wait: the lookup of a waiting job
// with the same key must not read the backlog.
func BenchmarkKeyedEnqueueBehindBacklog(b *testing.B) {
	db := openQueue(b, sqlite.Options{Synchronous: "normal"})
	ctx := b.Context()
	payload := json.RawMessage(`{"run_id":"run_0123456789abcdef"}`)
	for i := range 10_000 {
		if err := db.Enqueue(ctx, core.Job{Kind: "run", Key: fmt.Sprintf("waiting-%d", i), Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		if err := db.Enqueue(ctx, core.Job{Kind: "run", Key: fmt.Sprintf("new-%d", i), Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
}
