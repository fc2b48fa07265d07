// Package relay moves jobs from the store's transactional outbox (the jobs
// table the store writes in the same transaction as each state change) to an
// external queue such as Redis Streams. A job leaves the outbox only after the
// external queue accepted it, so a crash between the two sends it again: the
// external queue sees a job at least once, and consumers already tolerate
// duplicates (run claims, key coalescing).
package relay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Config configures a Relay. From and To are required.
type Config struct {
	// From is the outbox (the store's own queue).
	From core.Queue
	// To is the queue workers consume.
	To core.Queue
	// Consumer names this relay in From's leases. Default "relay".
	Consumer string
	// Lease is how long a job may take to be forwarded before another relay
	// may forward it again. Default 30s.
	Lease  time.Duration
	Logger *slog.Logger
}

// Relay forwards jobs from an outbox to a queue.
type Relay struct{ cfg Config }

// New returns a Relay with cfg's defaults filled in.
func New(cfg Config) (*Relay, error) {
	if cfg.From == nil || cfg.To == nil {
		return nil, errors.New("relay: from and to queues are required")
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "relay"
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg}, nil
}

// Forward moves one leased job; the job stays in the outbox if To refuses it.
func (r *Relay) Forward(ctx context.Context, j core.Job) error {
	out := core.Job{Kind: j.Kind, Key: j.Key, Payload: j.Payload, MaxAttempts: j.MaxAttempts, RunAt: j.RunAt}
	if err := r.cfg.To.Enqueue(ctx, out); err != nil {
		_, ferr := r.cfg.From.Fail(ctx, j, "relay: "+err.Error(), time.Second)
		return errors.Join(err, ferr)
	}
	return r.cfg.From.Ack(ctx, j)
}

// Drain forwards every job that is due now and returns how many it moved.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	n := 0
	for {
		j, ok, err := r.cfg.From.TryDequeue(ctx, r.cfg.Consumer, r.cfg.Lease)
		if err != nil || !ok {
			return n, err
		}
		if err := r.Forward(ctx, j); err != nil {
			return n, err
		}
		n++
	}
}

// Start forwards jobs as they become due until ctx ends.
func (r *Relay) Start(ctx context.Context) error {
	if _, err := r.cfg.From.Recover(ctx, r.cfg.Consumer); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("relay: recover", "err", err)
	}
	for {
		j, err := r.cfg.From.Dequeue(ctx, r.cfg.Consumer, r.cfg.Lease)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.cfg.Logger.Error("relay: dequeue", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		if err := r.Forward(ctx, j); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("relay: forward", "job", j.ID, "kind", j.Kind, "err", err)
		}
	}
}
