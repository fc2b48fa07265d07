package postgres_test

import (
	"encoding/json"
	"sync"
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

func TestQueueRejectsBadArguments(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{})
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
	t.Parallel()
	url := testURL(t)
	clock := queuetest.NewFakeClock(queuetest.Start)
	db := openDB(t, url, newSchema(t, url), postgres.Options{Clock: clock})
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

// TestEnqueueSameKeyConcurrently: concurrent enqueues of one key, from two
// handles (two "replicas"), leave one waiting job.
func TestEnqueueSameKeyConcurrently(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	dbs := []*postgres.DB{
		openDB(t, url, schema, postgres.Options{MaxConns: 8}),
		openDB(t, url, schema, postgres.Options{MaxConns: 8}),
	}
	ctx := t.Context()
	const keys, enqueuers = 5, 16
	var wg sync.WaitGroup
	for i := range enqueuers {
		wg.Go(func() {
			for k := range keys {
				j := core.RunJobFor(string(rune('a' + k)))
				if err := dbs[i%2].Enqueue(ctx, j); err != nil {
					t.Errorf("Enqueue(%s): %v", j.Key, err)
				}
			}
		})
	}
	wg.Wait()
	if n, err := dbs[0].Depth(ctx); err != nil || n != keys {
		t.Fatalf("Depth = %d, %v; want %d (one job per key)", n, err, keys)
	}
}

// TestDequeueWokenByOtherProcess: a Dequeue waiting on one handle is woken
// by NOTIFY when another handle (another process) enqueues, long before its
// poll interval.
func TestDequeueWokenByOtherProcess(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := newSchema(t, url)
	clock := queuetest.NewFakeClock(queuetest.Start)
	producer := openDB(t, url, schema, postgres.Options{Clock: clock})
	consumer := openDB(t, url, schema, postgres.Options{Clock: clock, PollInterval: time.Hour})
	// A store in another schema of the database does not deliver the job.
	other := openDB(t, url, newSchema(t, url), postgres.Options{Clock: clock})

	type dequeued struct {
		job core.Job
		err error
	}
	for round := range 3 {
		looked := clock.NextNow()
		ch := make(chan dequeued, 1)
		go func() {
			j, err := consumer.Dequeue(t.Context(), "c1", time.Minute)
			ch <- dequeued{j, err}
		}()
		select {
		case <-looked:
		case <-time.After(10 * time.Second):
			t.Fatal("Dequeue did not look at the queue")
		}
		select {
		case <-consumer.ListenerReady():
		case <-time.After(10 * time.Second):
			t.Fatal("listener did not LISTEN")
		}
		if err := other.Enqueue(t.Context(), core.Job{Kind: "elsewhere"}); err != nil {
			t.Fatal(err)
		}
		p := json.RawMessage(`{"round":` + string(rune('0'+round)) + `}`)
		if err := producer.Enqueue(t.Context(), core.Job{Kind: "test", Payload: p}); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-ch:
			if d.err != nil || string(d.job.Payload) != string(p) {
				t.Fatalf("round %d: Dequeue = %s, %v; want %s", round, d.job.Payload, d.err, p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Dequeue not woken by an enqueue on another handle", round)
		}
	}
}

// TestFailWhileSameKeyWaits: work enqueued while a keyed job is delivered
// becomes a second job (queuetest's KeyNotCoalescedWhileDelivered); when the
// first then fails, both wait with the same key, as in store/sqlite. (This
// is why coalescing serializes on an advisory lock instead of a unique index
// over waiting keys, which would refuse the Fail.)
func TestFailWhileSameKeyWaits(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	clock := queuetest.NewFakeClock(queuetest.Start)
	db := openDB(t, url, newSchema(t, url), postgres.Options{Clock: clock})
	ctx := t.Context()
	enqueue := func(p string) {
		t.Helper()
		if err := db.Enqueue(ctx, core.Job{Kind: "test", Key: "k", Payload: json.RawMessage(p)}); err != nil {
			t.Fatalf("Enqueue(%s): %v", p, err)
		}
	}
	enqueue(`1`)
	first, ok, err := db.TryDequeue(ctx, "c1", time.Hour)
	if err != nil || !ok {
		t.Fatalf("TryDequeue = %v, %v", ok, err)
	}
	enqueue(`2`)
	if dead, err := db.Fail(ctx, first, "boom", time.Minute); err != nil || dead {
		t.Fatalf("Fail = %v, %v; want a retry", dead, err)
	}
	// A third enqueue coalesces into the waiting jobs and pulls the retry forward.
	enqueue(`3`)
	if n, err := db.Depth(ctx); err != nil || n != 2 {
		t.Fatalf("Depth = %d, %v; want 2", n, err)
	}
	var got []string
	for range 2 {
		j, ok, err := db.TryDequeue(ctx, "c2", time.Hour)
		if err != nil || !ok {
			t.Fatalf("TryDequeue = %v, %v; want the two waiting jobs due now", ok, err)
		}
		got = append(got, string(j.Payload))
	}
	if got[0] != `1` || got[1] != `2` {
		t.Errorf("delivered %v, want [1 2]", got)
	}
}
