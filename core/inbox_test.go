package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

func openInboxDB(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"),
		sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// startService runs start until the test ends (or stop is called) and
// fails the test if it returns an error.
func startService(t *testing.T, start func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := start(ctx); err != nil {
			t.Errorf("start: %v", err)
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func slackMsg(key string, received time.Time) core.InboxMessage {
	return core.InboxMessage{Platform: "slack", Key: key, Payload: []byte(`"` + key + `"`), ReceivedAt: received}
}

// TestInboxWriter: concurrent appends are stored, each once, and answered
// after the commit; after stop, appends are refused.
func TestInboxWriter(t *testing.T) {
	t.Parallel()
	db := openInboxDB(t)
	committed := make(chan struct{}, 100)
	w, err := core.NewInboxWriter(core.InboxWriterConfig{Inbox: db, MaxBatch: 4,
		Committed: func() { committed <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	now := time.Now()
	for i := range 2 * n { // every message twice: a delivery and its retry
		wg.Go(func() {
			errs[i] = w.Append(t.Context(), slackMsg(fmt.Sprintf("k%02d", i%n), now.Add(time.Duration(i%n)*time.Millisecond)))
		})
	}
	stop := startService(t, w.Start) // appends made before Start wait for it
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Append %d: %v", i, err)
		}
	}
	if len(committed) == 0 {
		t.Error("Committed was not called")
	}
	msgs, err := db.ClaimInbox(t.Context(), "slack", "n1", now, now.Add(time.Minute), 100)
	if err != nil || len(msgs) != n {
		t.Fatalf("ClaimInbox = %d messages, %v; want %d", len(msgs), err, n)
	}
	stop()
	if err := w.Append(t.Context(), slackMsg("late", now)); !errors.Is(err, core.ErrInboxClosed) {
		t.Errorf("Append after stop = %v, want ErrInboxClosed", err)
	}
}

// failingInbox fails every AppendInbox.
type failingInbox struct{ core.Inbox }

func (failingInbox) AppendInbox(context.Context, []core.InboxMessage) (int, error) {
	return 0, errors.New("disk full")
}

func TestInboxWriterFailure(t *testing.T) {
	t.Parallel()
	w, err := core.NewInboxWriter(core.InboxWriterConfig{Inbox: failingInbox{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	startService(t, w.Start)
	if err := w.Append(t.Context(), slackMsg("k1", time.Now())); err == nil {
		t.Error("Append = nil, want the store's error (the delivery is not acknowledged)")
	}
}

// TestInboxProcessor: messages reach the handler in received order; a run
// created with the message's key settles it, a skipped or permanently
// failed one is settled, a transient failure is retried up to MaxAttempts.
func TestInboxProcessor(t *testing.T) {
	t.Parallel()
	db := openInboxDB(t)
	ctx := t.Context()
	t0 := time.Now()
	keys := []string{"ok", "skip", "bad", "flaky", "doomed"}
	var msgs []core.InboxMessage
	for i, k := range keys {
		msgs = append(msgs, slackMsg(k, t0.Add(time.Duration(i)*time.Millisecond)))
	}
	slices.Reverse(msgs) // stored newest first, processed oldest first
	if _, err := db.AppendInbox(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var calls []string
	doomed := make(chan struct{})
	createRun := func(ctx context.Context, key string) error {
		sid := core.NewID("ses")
		_, err := db.CreateRun(ctx, core.NewRun{
			Session:  core.Session{ID: sid, AgentID: "a"},
			Run:      core.Run{ID: core.NewID("run"), AgentID: "a", Type: core.RunTypeChat, Input: key},
			Platform: "slack", DedupeKey: key,
		})
		return err
	}
	handle := func(ctx context.Context, m core.InboxMessage) error {
		mu.Lock()
		calls = append(calls, m.Key)
		n := len(slices.DeleteFunc(slices.Clone(calls), func(k string) bool { return k != m.Key }))
		mu.Unlock()
		switch m.Key {
		case "ok":
			return createRun(ctx, m.Key)
		case "skip":
			return fmt.Errorf("not for the bot: %w", core.ErrInboxSkip)
		case "bad":
			return core.Permanent(errors.New("unknown agent"))
		case "flaky":
			if n < 3 {
				return errors.New("store busy")
			}
			return createRun(ctx, m.Key)
		}
		if n == 3 {
			close(doomed)
		}
		return errors.New("store busy")
	}
	p, err := core.NewInboxProcessor(core.InboxProcessorConfig{
		Inbox: db, Platform: "slack", Handle: handle, Owner: "n1", MaxAttempts: 3,
		Backoff: func(int) time.Duration { return 0 }, Poll: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := startService(t, p.Start)
	<-doomed
	stop() // finishes the message in hand

	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls[:5], keys) {
		t.Errorf("first calls = %v, want received order %v", calls[:5], keys)
	}
	count := map[string]int{}
	for _, k := range calls {
		count[k]++
	}
	if want := map[string]int{"ok": 1, "skip": 1, "bad": 1, "flaky": 3, "doomed": 3}; !maps.Equal(count, want) {
		t.Errorf("calls per message = %v, want %v", count, want)
	}
	if left, err := db.ClaimInbox(ctx, "slack", "n2", t0.Add(time.Hour), t0.Add(2*time.Hour), 10); err != nil || len(left) != 0 {
		t.Errorf("messages left waiting = %+v, %v; want none", left, err)
	}
	if c, err := db.CountRuns(ctx); err != nil || c[core.RunQueued] != 2 {
		t.Errorf("runs = %v, %v; want 2 queued (ok and flaky)", c, err)
	}
}

// TestInboxProcessorRestartAndWake: a processor that starts under the name
// of one that died takes its claimed messages back at once, and a Wake gets
// a new message processed without waiting for the poll.
func TestInboxProcessorRestartAndWake(t *testing.T) {
	t.Parallel()
	db := openInboxDB(t)
	ctx := t.Context()
	now := time.Now()
	if _, err := db.AppendInbox(ctx, []core.InboxMessage{slackMsg("k1", now)}); err != nil {
		t.Fatal(err)
	}
	// The node died holding a claim for an hour.
	if got, err := db.ClaimInbox(ctx, "slack", "n1", now, now.Add(time.Hour), 10); err != nil || len(got) != 1 {
		t.Fatalf("ClaimInbox = %v, %v", got, err)
	}
	seen := make(chan string, 10)
	p, err := core.NewInboxProcessor(core.InboxProcessorConfig{
		Inbox: db, Platform: "slack", Owner: "n1", Poll: time.Hour, Logger: slog.New(slog.DiscardHandler),
		Handle: func(ctx context.Context, m core.InboxMessage) error {
			seen <- m.Key
			return core.ErrInboxSkip
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	startService(t, p.Start)
	if k := <-seen; k != "k1" {
		t.Fatalf("first message = %s, want k1", k)
	}
	if _, err := db.AppendInbox(ctx, []core.InboxMessage{slackMsg("k2", now)}); err != nil {
		t.Fatal(err)
	}
	p.Wake()
	if k := <-seen; k != "k2" {
		t.Fatalf("second message = %s, want k2", k)
	}
}

// TestInboxRestartsKeepTheBacklogsAttempts: a processor claims a batch and
// is stopped after handling one message, again and again (a gateway
// restarted while a backlog waits). The messages it held unhanded keep
// their attempts: every message reaches the handler, none is given up on.
func TestInboxRestartsKeepTheBacklogsAttempts(t *testing.T) {
	t.Parallel()
	db := openInboxDB(t)
	now := time.Now()
	var msgs []core.InboxMessage
	for i := range 10 {
		msgs = append(msgs, slackMsg(fmt.Sprintf("m%02d", i), now.Add(time.Duration(i)*time.Millisecond)))
	}
	if _, err := db.AppendInbox(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	handled := map[string]int{}
	for start := range len(msgs) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		p, err := core.NewInboxProcessor(core.InboxProcessorConfig{Inbox: db, Platform: "slack", Owner: "n1", MaxAttempts: 3,
			Logger: slog.New(slog.DiscardHandler),
			Handle: func(hctx context.Context, m core.InboxMessage) error {
				handled[m.Key]++
				cancel() // stopped while it handles this one
				return core.ErrInboxSkip
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if n := len(handled); n != start+1 {
			t.Fatalf("after %d starts, %d messages reached the handler, want %d", start+1, n, start+1)
		}
	}
	for _, m := range msgs {
		if handled[m.Key] != 1 {
			t.Errorf("message %s reached the handler %d times, want once", m.Key, handled[m.Key])
		}
	}
}

// blockingInbox holds every AppendInbox until release is closed.
type blockingInbox struct {
	core.Inbox
	entered chan struct{}
	release chan struct{}
}

func (b blockingInbox) AppendInbox(_ context.Context, msgs []core.InboxMessage) (int, error) {
	b.entered <- struct{}{}
	<-b.release
	return len(msgs), nil
}

// TestInboxWriterYield: Yield waits while the writer stores a batch and
// for the quiet time after it, but no longer than max.
func TestInboxWriterYield(t *testing.T) {
	t.Parallel()
	ib := blockingInbox{entered: make(chan struct{}, 10), release: make(chan struct{})}
	w, err := core.NewInboxWriter(core.InboxWriterConfig{Inbox: ib})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w.Yield(ctx, time.Hour, time.Hour) // never busy: at once
	startService(t, w.Start)
	appended := make(chan error, 1)
	go func() { appended <- w.Append(ctx, slackMsg("k1", time.Now())) }()
	<-ib.entered

	w.Yield(ctx, time.Millisecond, 10*time.Millisecond) // busy: returns after max
	var released atomic.Bool
	yielded := make(chan bool, 1)
	go func() {
		w.Yield(ctx, time.Millisecond, time.Hour)
		yielded <- released.Load()
	}()
	released.Store(true)
	close(ib.release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if !<-yielded {
		t.Error("Yield returned while the writer was storing a batch")
	}
}
