package redisstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/queuetest"
)

// redisURLEnv names the Redis the tests use; CI sets it.
const redisURLEnv = "AGENTGATE_TEST_REDIS_URL"

// testClient connects to the test Redis, or skips tb when none is
// configured.
func testClient(tb testing.TB) *redis.Client {
	tb.Helper()
	url := os.Getenv(redisURLEnv)
	if url == "" {
		tb.Skipf("%s is not set: set it to a Redis URL (e.g. redis://127.0.0.1:6379/0) to run the Redis Streams queue tests", redisURLEnv)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("%s: %v", redisURLEnv, err)
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { c.Close() })
	if err := c.Ping(tb.Context()).Err(); err != nil {
		tb.Fatalf("ping Redis at %s: %v", url, err)
	}
	return c
}

// testPrefix returns a prefix no other test uses and deletes its keys when
// tb ends.
func testPrefix(tb testing.TB, c *redis.Client) string {
	tb.Helper()
	prefix := "test-" + strings.ToLower(core.NewID("q"))
	tb.Cleanup(func() {
		// tb.Context is already done when cleanups run.
		if err := c.Del(context.Background(), newKeys(prefix).script()...).Err(); err != nil {
			tb.Errorf("delete keys of %s: %v", prefix, err)
		}
	})
	return prefix
}

// openQueue opens a queue on a fresh prefix with opts (Prefix is set here).
func openQueue(tb testing.TB, opts Options) (*Queue, *redis.Client) {
	tb.Helper()
	c := testClient(tb)
	opts.Prefix = testPrefix(tb, c)
	q, err := New(c, opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return q, c
}

func TestQueue(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, clock *queuetest.FakeClock) (core.Queue, func() core.Queue) {
		c := testClient(t)
		opts := Options{
			Prefix:       testPrefix(t, c),
			Clock:        clock,
			MaxAttempts:  5,
			Backoff:      DefaultBackoff,
			PollInterval: 10 * time.Millisecond,
		}
		q, err := New(c, opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		reopen := func() core.Queue {
			// A new client and a new Queue on the same prefix: all state
			// must come from Redis.
			c := testClient(t)
			q, err := New(c, opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			return q
		}
		return q, reopen
	})
}

// TestQueuePeers runs the suite of Queues that share a prefix, as replicas
// do; a job one adds to the stream wakes another's Dequeue.
func TestQueuePeers(t *testing.T) {
	queuetest.RunPeers(t, func(t *testing.T, clock *queuetest.FakeClock) func() (core.Queue, <-chan struct{}) {
		opts := Options{
			Prefix:       testPrefix(t, testClient(t)),
			Clock:        clock,
			MaxAttempts:  5,
			Backoff:      DefaultBackoff,
			PollInterval: time.Hour,
		}
		return func() (core.Queue, <-chan struct{}) {
			// Each on its own client, as in another process.
			q, err := New(testClient(t), opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return q, nil
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	c := testClient(t)
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"brace in prefix", Options{Prefix: "a{b"}},
		{"negative max attempts", Options{Prefix: "x", MaxAttempts: -1}},
		{"negative poll interval", Options{Prefix: "x", PollInterval: -time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(c, tt.opts); err == nil {
				t.Errorf("New(%+v): want error", tt.opts)
			}
		})
	}
}

// streamIDs lists the ids of the entries in q's stream.
func streamIDs(t *testing.T, c *redis.Client, q *Queue) []string {
	t.Helper()
	msgs, err := c.XRange(t.Context(), q.keys.stream, "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE: %v", err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func TestStreamTrimmedAfterAckKeepsUnacked(t *testing.T) {
	t.Parallel()
	clock := queuetest.NewFakeClock(queuetest.Start)
	q, c := openQueue(t, Options{Clock: clock})
	ctx := t.Context()

	// One job is delivered and never settled; its entry must outlive
	// everything enqueued and settled after it.
	if err := q.Enqueue(ctx, core.Job{Kind: "test", Payload: json.RawMessage(`"held"`)}); err != nil {
		t.Fatal(err)
	}
	held, ok, err := q.TryDequeue(ctx, "holder", 365*24*time.Hour)
	if err != nil || !ok {
		t.Fatalf("TryDequeue = %v, %v", ok, err)
	}
	heldEntry := streamIDs(t, c, q)
	if len(heldEntry) != 1 {
		t.Fatalf("stream entries after one delivery = %v, want one", heldEntry)
	}

	const rounds = 300
	for i := range rounds {
		if err := q.Enqueue(ctx, core.Job{Kind: "test", Payload: json.RawMessage(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		j, ok, err := q.TryDequeue(ctx, "worker", time.Minute)
		if err != nil || !ok {
			t.Fatalf("round %d: TryDequeue = %v, %v", i, ok, err)
		}
		switch i % 3 {
		case 0:
			err = q.Ack(ctx, j)
		case 1: // the retry is a new entry; the failed one goes at once
			if _, err = q.Fail(ctx, j, "boom", time.Second); err == nil {
				clock.Advance(time.Second)
				if j, ok, err = q.TryDequeue(ctx, "worker", time.Minute); err == nil && ok {
					err = q.Ack(ctx, j)
				}
			}
		case 2: // an expired lease is redelivered through the same entry
			clock.Advance(time.Minute)
			if j, ok, err = q.TryDequeue(ctx, "worker", time.Minute); err == nil && ok {
				if j.Attempt != 2 {
					t.Fatalf("round %d: redelivery Attempt = %d, want 2", i, j.Attempt)
				}
				err = q.Ack(ctx, j)
			}
		}
		if err != nil || !ok {
			t.Fatalf("round %d: settle = %v, %v", i, ok, err)
		}
		if got := streamIDs(t, c, q); len(got) != 1 || got[0] != heldEntry[0] {
			t.Fatalf("round %d: stream entries = %v, want only the held job's %v", i, got, heldEntry)
		}
	}
	pending, err := c.XPending(ctx, q.keys.stream, q.opts.Group).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != 1 || pending.Lower != heldEntry[0] {
		t.Fatalf("PEL = %+v, want only %s", pending, heldEntry[0])
	}
	if n, err := q.Depth(ctx); err != nil || n != 1 {
		t.Fatalf("Depth = %d, %v; want 1", n, err)
	}
	// The held lease still settles its job, and then the stream is empty.
	if err := q.Ack(ctx, held); err != nil {
		t.Fatalf("Ack of the held job: %v", err)
	}
	if n, err := c.XLen(ctx, q.keys.stream).Result(); err != nil || n != 0 {
		t.Fatalf("XLEN after the last Ack = %d, %v; want 0", n, err)
	}
}

func TestLeaseFollowsPEL(t *testing.T) {
	t.Parallel()
	clock := queuetest.NewFakeClock(queuetest.Start)
	q, c := openQueue(t, Options{Clock: clock})
	ctx := t.Context()
	pel := func() []redis.XPendingExt {
		t.Helper()
		p, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.keys.stream, Group: q.opts.Group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	if err := q.Enqueue(ctx, core.Job{Kind: "test"}); err != nil {
		t.Fatal(err)
	}
	first, _, err := q.TryDequeue(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p := pel()
	if len(p) != 1 || p[0].Consumer != "c1" || p[0].RetryCount != 1 {
		t.Fatalf("PEL after delivery = %+v, want one entry owned by c1, delivered once", p)
	}
	if !strings.HasPrefix(first.Lease, p[0].ID+"/") {
		t.Errorf("lease %q does not name PEL entry %s", first.Lease, p[0].ID)
	}

	// Extend keeps the owner and does not count a delivery.
	if err := q.Extend(ctx, first, time.Minute); err != nil {
		t.Fatal(err)
	}
	if p := pel(); len(p) != 1 || p[0].Consumer != "c1" || p[0].RetryCount != 1 {
		t.Fatalf("PEL after Extend = %+v, want c1, delivered once", p)
	}

	// An expired lease moves the entry to the next consumer.
	clock.Advance(time.Minute)
	second, ok, err := q.TryDequeue(ctx, "c2", time.Minute)
	if err != nil || !ok || second.Attempt != 2 {
		t.Fatalf("redelivery = %+v, %v, %v; want attempt 2", second, ok, err)
	}
	if p := pel(); len(p) != 1 || p[0].Consumer != "c2" || p[0].RetryCount != 2 {
		t.Fatalf("PEL after redelivery = %+v, want c2, delivered twice", p)
	}
	if n, err := q.Recover(ctx, "c1"); err != nil || n != 0 {
		t.Fatalf("Recover(c1) after its entry moved to c2 = %d, %v; want 0", n, err)
	}

	// Ack empties the PEL and the stream.
	if err := q.Ack(ctx, second); err != nil {
		t.Fatal(err)
	}
	if p := pel(); len(p) != 0 {
		t.Fatalf("PEL after Ack = %+v, want empty", p)
	}
}

func TestRecoverManyEntries(t *testing.T) {
	t.Parallel()
	clock := queuetest.NewFakeClock(queuetest.Start)
	q, _ := openQueue(t, Options{Clock: clock})
	ctx := t.Context()
	const n = 250 // more than one page of XPENDING
	for range n {
		if err := q.Enqueue(ctx, core.Job{Kind: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := q.TryDequeue(ctx, "a", time.Hour); err != nil || !ok {
			t.Fatalf("TryDequeue = %v, %v", ok, err)
		}
	}
	if got, err := q.Recover(ctx, "a"); err != nil || got != n {
		t.Fatalf("Recover(a) = %d, %v; want %d", got, err, n)
	}
	for i := range n {
		j, ok, err := q.TryDequeue(ctx, "b", time.Hour)
		if err != nil || !ok || j.Attempt != 2 {
			t.Fatalf("redelivery %d = %+v, %v, %v; want attempt 2", i, j, ok, err)
		}
		if err := q.Ack(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := q.TryDequeue(ctx, "b", time.Hour); ok {
		t.Fatal("a job left after all recovered jobs were acked")
	}
}

// BenchmarkRedisEnqueueDequeueAck measures one job's full round trip (three
// scripts) on the real clock.
func BenchmarkRedisEnqueueDequeueAck(b *testing.B) {
	q, _ := openQueue(b, Options{})
	ctx := b.Context()
	payload := json.RawMessage(`{"run_id":"run_0123456789abcdef"}`)
	for b.Loop() {
		if err := q.Enqueue(ctx, core.Job{Kind: "run", Payload: payload}); err != nil {
			b.Fatal(err)
		}
		j, ok, err := q.TryDequeue(ctx, "bench", time.Minute)
		if err != nil || !ok {
			b.Fatalf("TryDequeue = %v, %v", ok, err)
		}
		if err := q.Ack(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
}

func TestWorksAgainAfterFlushAll(t *testing.T) {
	url := os.Getenv("AGENTGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("AGENTGATE_TEST_REDIS_URL is unset")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.DB = 15 // FLUSHDB below must not touch other tests' keys in db 0
	client := redis.NewClient(opt)
	defer client.Close()
	q, err := New(client, Options{Prefix: core.NewID("flush")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := q.Enqueue(ctx, core.Job{Kind: "k", Payload: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := client.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The data is gone (the store's janitor re-enqueues it); the queue works again.
	if _, ok, err := q.TryDequeue(ctx, "c", time.Minute); err != nil || ok {
		t.Fatalf("after flush: TryDequeue = %v, %v; want nothing and no error", ok, err)
	}
	if err := q.Enqueue(ctx, core.Job{Kind: "k", Payload: []byte(`2`)}); err != nil {
		t.Fatal(err)
	}
	j, ok, err := q.TryDequeue(ctx, "c", time.Minute)
	if err != nil || !ok || string(j.Payload) != "2" {
		t.Fatalf("after flush and enqueue: %v %v %s", err, ok, j.Payload)
	}
	if err := q.Ack(ctx, j); err != nil {
		t.Fatal(err)
	}
	client.FlushDB(context.Background())
}
