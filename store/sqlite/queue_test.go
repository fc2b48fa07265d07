package sqlite_test

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
	"github.com/agentgate/agentgate/store/sqlite"
)

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

func TestQueueRejectsBadArguments(t *testing.T) {
	db := openQueue(t, sqlite.Options{})
	ctx := t.Context()
	if _, _, err := db.TryDequeue(ctx, "", time.Minute); err == nil {
		t.Error("TryDequeue with empty consumer: want error")
	}
	if _, _, err := db.TryDequeue(ctx, "c1", 0); err == nil {
		t.Error("TryDequeue with zero lease: want error")
	}
	if _, err := db.Recover(ctx, ""); err == nil {
		t.Error("Recover with empty consumer: want error")
	}
	if err := db.Enqueue(ctx, core.Job{Kind: "test"}); err != nil {
		t.Fatal(err)
	}
	j, ok, err := db.TryDequeue(ctx, "c1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("TryDequeue = %v, %v", ok, err)
	}
	if err := db.Extend(ctx, j, -time.Second); err == nil {
		t.Error("Extend with negative lease: want error")
	}
	if string(j.Payload) != "null" {
		t.Errorf("nil payload delivered as %s, want null", j.Payload)
	}
}

func TestQueueExpiredLeaseDeadLetterKeepsLastError(t *testing.T) {
	clock := queuetest.NewFakeClock(queuetest.Start)
	db := openQueue(t, sqlite.Options{Clock: clock})
	ctx := t.Context()
	if err := db.Enqueue(ctx, core.Job{Kind: "test", MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	j, _, _ := db.TryDequeue(ctx, "c1", time.Minute)
	if _, err := db.Fail(ctx, j, "boom", time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, ok, _ := db.TryDequeue(ctx, "c1", time.Minute); !ok {
		t.Fatal("retry not delivered")
	}
	clock.Advance(time.Minute)
	if _, ok, _ := db.TryDequeue(ctx, "c1", time.Minute); ok {
		t.Fatal("third delivery of a job with MaxAttempts 2")
	}
	dl, err := db.DeadLetters(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "delivery limit reached: 2 attempts; last error: boom"; len(dl) != 1 || dl[0].LastError != want {
		t.Fatalf("DeadLetters = %+v, want one with LastError %q", dl, want)
	}
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
