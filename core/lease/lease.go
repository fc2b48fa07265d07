// Package lease runs work that must happen on one node at a time cluster-wide
// (approval expiry sweeps, the janitor, schedule ticks): the work runs only
// while this node holds a named, expiring lease in the store, and another
// node takes over when the holder dies and its lease runs out.
package lease

import (
	"context"
	"log/slog"
	"time"
)

// Store keeps leases. A lease is held by one holder until it expires;
// Acquire takes a free or expired lease, or renews one the holder has.
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
}

// Run calls fn with a context that lives while holder holds lease name, and
// tries to (re)take the lease every ttl/3 until ctx ends. fn should return
// when its context ends. The lease is released at the end.
func Run(ctx context.Context, s Store, name, holder string, ttl time.Duration, log *slog.Logger, fn func(context.Context)) {
	if log == nil {
		log = slog.Default()
	}
	every := ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	defer func() {
		stop()
		rctx, c := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer c()
		_ = s.ReleaseLease(rctx, name, holder) // it expires anyway
	}()
	for {
		ok, err := s.AcquireLease(ctx, name, holder, ttl)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("lease: acquire", "lease", name, "err", err)
			stop() // we cannot prove we still hold it
		case ok && cancel == nil:
			log.Info("lease acquired", "lease", name, "holder", holder)
			cancel, done = start(ctx, fn)
		case !ok && cancel != nil:
			log.Warn("lease lost", "lease", name, "holder", holder)
			stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// start runs fn in its own goroutine under a context of its own; done closes
// when fn has returned.
func start(ctx context.Context, fn func(context.Context)) (context.CancelFunc, chan struct{}) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); fn(wctx) }()
	return cancel, done
}
