package sqlite

import (
	"context"
	"slices"
	"sync"
)

// writeLock hands SQLite's one write connection to one transaction at a
// time. Urgent transactions (the inbox's group commit, which webhook
// requests wait on before they are acknowledged) go before the others
// waiting, so an acknowledgement waits for at most one other transaction
// rather than for every run step queued for the connection; transactions of
// one kind go in arrival order.
type writeLock struct {
	mu     sync.Mutex
	held   bool
	urgent []chan struct{} // waiting, in arrival order
	other  []chan struct{}
}

// lock waits for the connection; an error (ctx ended) means it was not taken.
func (l *writeLock) lock(ctx context.Context, urgent bool) error {
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	q := &l.other
	if urgent {
		q = &l.urgent
	}
	*q = append(*q, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	if i := slices.Index(*q, ch); i >= 0 {
		*q = slices.Delete(*q, i, i+1)
		l.mu.Unlock()
		return ctx.Err()
	}
	l.mu.Unlock()
	<-ch // handed over meanwhile: pass it on
	l.unlock()
	return ctx.Err()
}

// unlock hands the connection to the next waiter, urgent ones first.
func (l *writeLock) unlock() {
	l.mu.Lock()
	var next chan struct{}
	for _, q := range []*[]chan struct{}{&l.urgent, &l.other} {
		if len(*q) > 0 {
			next = (*q)[0]
			*q = slices.Delete(*q, 0, 1)
			break
		}
	}
	l.held = next != nil
	l.mu.Unlock()
	if next != nil {
		close(next)
	}
}
