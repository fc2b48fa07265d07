package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/relay"
	"github.com/agentgate/agentgate/store/sqlite"
)

func open(t *testing.T, name string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), name), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// refusing is a queue whose Enqueue fails while down is true.
type refusing struct {
	core.Queue
	down bool
}

func (q *refusing) Enqueue(ctx context.Context, j core.Job) error {
	if q.down {
		return errors.New("connection refused")
	}
	return q.Queue.Enqueue(ctx, j)
}

func TestDrainMovesEveryDueJobOnce(t *testing.T) {
	from, to := open(t, "outbox.db"), open(t, "queue.db")
	for i := range 3 {
		p, _ := json.Marshal(i)
		if err := from.Enqueue(t.Context(), core.Job{Kind: "k", Key: "", Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := from.Enqueue(t.Context(), core.Job{Kind: "later", RunAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r, _ := relay.New(relay.Config{From: from, To: to})
	n, err := r.Drain(t.Context())
	if err != nil || n != 3 {
		t.Fatalf("Drain = %d, %v; want 3 due jobs", n, err)
	}
	if d, _ := from.Depth(t.Context()); d != 1 {
		t.Fatalf("outbox depth %d, want 1 (the delayed job stays until due)", d)
	}
	var got []string
	for {
		j, ok, err := to.TryDequeue(t.Context(), "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(j.Payload))
	}
	if len(got) != 3 || got[0] != "0" || got[2] != "2" {
		t.Fatalf("forwarded %v, want [0 1 2] in order", got)
	}
}

func TestRefusedJobStaysInTheOutbox(t *testing.T) {
	from, to := open(t, "outbox.db"), open(t, "queue.db")
	if err := from.Enqueue(t.Context(), core.RunJobFor("run_1")); err != nil {
		t.Fatal(err)
	}
	q := &refusing{Queue: to, down: true}
	r, _ := relay.New(relay.Config{From: from, To: q})
	if _, err := r.Drain(t.Context()); err == nil {
		t.Fatal("Drain succeeded while the queue refused jobs")
	}
	if d, _ := from.Depth(t.Context()); d != 1 {
		t.Fatalf("outbox depth %d after a refused forward, want 1", d)
	}
	if d, _ := to.Depth(t.Context()); d != 0 {
		t.Fatalf("queue depth %d, want 0", d)
	}
}
