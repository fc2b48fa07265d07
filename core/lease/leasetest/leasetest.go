// Package leasetest is the conformance suite every lease.Store must pass.
package leasetest

import (
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/lease"
)

// Clock is the clock the store under test must read for lease expiry.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Run runs the suite; newStore returns a fresh, empty store reading clock.
func Run(t *testing.T, newStore func(t *testing.T, clock *Clock) lease.Store) {
	t.Run("one holder at a time", func(t *testing.T) {
		t.Parallel()
		c := NewClock()
		s := newStore(t, c)
		ctx := t.Context()
		mustAcquire(t, s, "tick", "a", true)
		mustAcquire(t, s, "tick", "b", false)
		mustAcquire(t, s, "other", "b", true) // leases are independent
		mustAcquire(t, s, "tick", "a", true)  // the holder renews
		c.Advance(9 * time.Second)
		mustAcquire(t, s, "tick", "b", false) // renewed at t0, still live
		if err := s.ReleaseLease(ctx, "tick", "b"); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, s, "tick", "b", false) // b cannot release a's lease
		if err := s.ReleaseLease(ctx, "tick", "a"); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, s, "tick", "b", true)
	})
	t.Run("a dead holder is replaced after expiry", func(t *testing.T) {
		t.Parallel()
		c := NewClock()
		s := newStore(t, c)
		mustAcquire(t, s, "tick", "a", true)
		c.Advance(10*time.Second - time.Millisecond)
		mustAcquire(t, s, "tick", "b", false)
		c.Advance(time.Millisecond)
		mustAcquire(t, s, "tick", "b", true)
		mustAcquire(t, s, "tick", "a", false)
	})
	t.Run("racing acquirers: exactly one wins", func(t *testing.T) {
		t.Parallel()
		c := NewClock()
		s := newStore(t, c)
		for round := range 5 {
			name := "race" + string(rune('a'+round))
			var mu sync.Mutex
			wins := 0
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					ok, err := s.AcquireLease(t.Context(), name, string(rune('A'+i)), 10*time.Second)
					if err != nil {
						t.Error(err)
					}
					if ok {
						mu.Lock()
						wins++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if wins != 1 {
				t.Fatalf("round %d: %d holders, want 1", round, wins)
			}
		}
	})
}

func mustAcquire(t *testing.T, s lease.Store, name, holder string, want bool) {
	t.Helper()
	ok, err := s.AcquireLease(t.Context(), name, holder, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ok != want {
		t.Fatalf("AcquireLease(%s, %s) = %v, want %v", name, holder, ok, want)
	}
}
