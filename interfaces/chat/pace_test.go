package chat

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// pacerClock is a clock whose Sleep moves it and records the wait.
type pacerClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *pacerClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *pacerClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

var errTooMany = errors.New("429")

func newPacer(c *pacerClock) *Pacer {
	return &Pacer{Platform: "test", Retries: 2, Now: c.Now, Sleep: c.Sleep,
		Limits: func(string) []*rate.Limiter { return []*rate.Limiter{rate.NewLimiter(rate.Every(time.Second), 1)} },
		RetryAfter: func(err error) (time.Duration, bool) {
			return 30 * time.Second, errors.Is(err, errTooMany)
		}}
}

// A 429 in one place holds every call there back for the time it asks,
// and the call is made again; other places go on.
func TestPacerPausesThePlaceOfA429(t *testing.T) {
	c := &pacerClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	p := newPacer(c)
	calls := 0
	err := p.Call(t.Context(), "chat-1", func(context.Context) error {
		if calls++; calls == 1 {
			return errTooMany
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Call = %v after %d calls; want success on the second", err, calls)
	}
	if len(c.sleeps) != 1 || c.sleeps[0] != 30*time.Second {
		t.Fatalf("waits = %v; want the 429's 30s", c.sleeps)
	}
	at := c.Now()
	if err := p.Call(t.Context(), "chat-2", func(context.Context) error { return nil }); err != nil || c.Now() != at {
		t.Fatalf("another place waited %s (err %v); want no wait", c.Now().Sub(at), err)
	}
}

// A place still answering 429 after Retries fails with ErrNotSent: the
// caller knows nothing was posted.
func TestPacerGivesUpNotSent(t *testing.T) {
	c := &pacerClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	p := newPacer(c)
	calls := 0
	err := p.Call(t.Context(), "chat-1", func(context.Context) error { calls++; return errTooMany })
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, errTooMany) || calls != 3 {
		t.Fatalf("Call = %v after %d calls; want ErrNotSent wrapping the 429 after 1 + 2 retries", err, calls)
	}
	other := errors.New("refused")
	if err := p.Call(t.Context(), "", func(context.Context) error { return other }); err != other {
		t.Fatalf("Call = %v; want the platform's error as is", err)
	}
}

// A call whose context ends while it waits its turn is not made.
func TestPacerCancelledWhileWaiting(t *testing.T) {
	c := &pacerClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	p := newPacer(c)
	ok := func(context.Context) error { return nil }
	if err := p.Call(t.Context(), "chat-1", ok); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	made := false
	err := p.Call(ctx, "chat-1", func(context.Context) error { made = true; return nil })
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, context.Canceled) || made {
		t.Fatalf("Call = %v (made: %t); want ErrNotSent, context.Canceled, not made", err, made)
	}
}
