package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
	"github.com/agentgate/agentgate/store/postgres"
)

// A waiting Dequeue sleeps until the next job is due instead of polling
// (queuetest.RunWakesWhenDue), with the listener up.
func TestDequeueWakesWhenDue(t *testing.T) {
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{PollInterval: time.Hour})
	queuetest.RunWakesWhenDue(t, db, asleep(db))
}

// Jobs enqueued while several workers wait reach all of them
// (queuetest.RunWakesEveryWorker), though an enqueue wakes only one.
func TestDequeueWakesEveryWorker(t *testing.T) {
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{PollInterval: time.Hour})
	queuetest.RunWakesEveryWorker(t, db, asleep(db))
}

// asleep waits for waiting workers to look and go to sleep: the store does
// not tell, so it waits until its statements stop for a while.
func asleep(db *postgres.DB) func(n int) {
	return func(int) {
		<-db.ListenerReady()
		queuetest.Quiet(db.RoundTrips)
	}
}

// An enqueue wakes one of the workers waiting, not all: with eight waiting
// the statements from the enqueue to a quiet queue are a handful (the
// enqueue, the dequeue that takes the job, one or two looks that find
// nothing), where waking them all cost two looks per worker.
func TestEnqueueWakesOneWorker(t *testing.T) {
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{PollInterval: time.Hour})
	const workers = 8
	got := make(chan error, workers)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base := db.RoundTrips()
	for range workers {
		go func() {
			_, err := db.Dequeue(ctx, "w", time.Minute)
			got <- err
		}()
	}
	for db.RoundTrips()-base < workers { // each worker's first look (a look after the count would add to it)
		time.Sleep(10 * time.Millisecond)
	}
	asleep(db)(workers)
	before := db.RoundTrips()
	if err := db.Enqueue(t.Context(), core.Job{Kind: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	asleep(db)(workers - 1) // the looks the wake-up started are over
	if n := db.RoundTrips() - before; n > workers {
		t.Errorf("one enqueue with %d workers waiting: %d statements; want a handful, not looks by every worker", workers, n)
	} else {
		t.Logf("one enqueue with %d workers waiting: %d statements", workers, n)
	}
}

// A replica's own enqueue wakes its waiting worker when it commits; the
// notification it also sends, which comes back to its own listener, wakes
// nobody here again — one from another replica does.
func TestOwnNotificationsSkipped(t *testing.T) {
	url := testURL(t)
	schema := newSchema(t, url)
	a := openDB(t, url, schema, postgres.Options{PollInterval: time.Hour})
	b := openDB(t, url, schema, postgres.Options{PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, db := range []*postgres.DB{a, b} {
		go func() { _, _ = db.Dequeue(ctx, "w", time.Minute) }() // starts the listener
		<-db.ListenerReady()
	}
	if err := a.Enqueue(t.Context(), core.Job{Kind: "from-a"}); err != nil {
		t.Fatal(err)
	}
	heard(t, b) // a's listener got the notification too
	time.Sleep(100 * time.Millisecond)
	if n := a.Heard(); n != 0 {
		t.Errorf("a's own notification woke a %d times; want 0 (its commit woke it)", n)
	}
	if err := b.Enqueue(t.Context(), core.Job{Kind: "from-b"}); err != nil {
		t.Fatal(err)
	}
	heard(t, a)
}

// heard waits until db's listener woke a worker for another's notification.
func heard(t *testing.T, db *postgres.DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); db.Heard() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other replica's notification did not wake this one within 10 s")
		}
	}
}
