package sqlite

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// queued waits until n transactions wait for the lock.
func (l *writeLock) queued(n int) {
	for {
		l.mu.Lock()
		got := len(l.urgent) + len(l.other)
		l.mu.Unlock()
		if got == n {
			return
		}
		runtime.Gosched()
	}
}

// TestWriteLockOrder: urgent transactions go before the others waiting,
// each kind in arrival order; a waiter whose context ends leaves the queue.
func TestWriteLockOrder(t *testing.T) {
	t.Parallel()
	var l writeLock
	ctx := t.Context()
	if err := l.lock(ctx, false); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	waiter := func(name string, urgent bool) {
		go func() {
			if err := l.lock(ctx, urgent); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			order <- name
			l.unlock()
		}()
	}
	waiter("other-1", false)
	l.queued(1)
	gone, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() { cancelled <- l.lock(gone, false) }()
	l.queued(2)
	waiter("urgent-1", true)
	l.queued(3)
	waiter("other-2", false)
	l.queued(4)
	waiter("urgent-2", true)
	l.queued(5)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with a cancelled context = %v, want context.Canceled", err)
	}
	l.queued(4)
	l.unlock()
	var got []string
	for range 4 {
		got = append(got, <-order)
	}
	want := []string{"urgent-1", "urgent-2", "other-1", "other-2"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
	if err := l.lock(ctx, false); err != nil { // free again
		t.Fatal(err)
	}
	l.unlock()
}
