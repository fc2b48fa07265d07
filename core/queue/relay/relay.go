// Package relay moves jobs from the store's transactional outbox (the jobs
// table the store writes in the same transaction as each state change) to an
// external queue such as Redis Streams. A job leaves the outbox only after the
// external queue accepted it, so a crash between the two sends it again: the
// external queue sees a job at least once, and consumers already tolerate
// duplicates (run claims, key coalescing).
//
// Run jobs leave the outbox once forwarded: the janitor rebuilds them from
// the runs if the external queue loses them. Other jobs (a chat answer to
// post, an approval card to edit, a routine result to deliver) have no such
// source, so an outbox that can keep them (Keeper) holds each until its
// forwarded copy was handled (Receipts), and forwards it again if that did not
// happen within Recheck — when Redis lost its data, say.
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
	Lease time.Duration
	// Recheck is how long a kept job waits for its receipt before it is
	// forwarded again (a copy still queued is not doubled). Default 2m.
	Recheck time.Duration
	// Now tells the time; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Keeper is an outbox that keeps forwarded jobs until they were handled.
type Keeper interface {
	// Keep releases the relay's lease on forwarded job j and hides it until
	// until, without counting the delivery.
	Keep(ctx context.Context, j core.Job, until time.Time) error
	// Done removes job id: its forwarded copy was handled.
	Done(ctx context.Context, id string) error
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
	if cfg.Recheck <= 0 {
		cfg.Recheck = 2 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg}, nil
}

// Forward moves one leased job; the job stays in the outbox if To refuses it,
// and is tried again a second later. A refusal does not count as a delivery
// when the outbox can keep jobs (Keeper): however long Redis is down, no job
// is dead-lettered for it. A job other than a run's is kept until its
// receipt.
func (r *Relay) Forward(ctx context.Context, j core.Job) error {
	if err := r.cfg.To.Enqueue(ctx, j.Again(j.RunAt)); err != nil && !errors.Is(err, core.ErrJobExists) {
		if k, ok := r.cfg.From.(Keeper); ok {
			return errors.Join(err, k.Keep(ctx, j, r.cfg.Now().Add(time.Second)))
		}
		_, ferr := r.cfg.From.Fail(ctx, j, "relay: "+err.Error(), time.Second)
		return errors.Join(err, ferr)
	}
	if k, ok := r.cfg.From.(Keeper); ok && j.Kind != core.JobRun {
		return k.Keep(ctx, j, r.cfg.Now().Add(r.cfg.Recheck))
	}
	return r.cfg.From.Ack(ctx, j)
}

// Receipts wraps the queue workers consume (the relay's To) so that a job
// acknowledged or dead-lettered there is removed from the outbox that keeps
// it. A receipt that cannot be written is logged: the job is forwarded again
// after Recheck and handled again, which its handler tolerates.
func Receipts(q core.Queue, outbox Keeper, log *slog.Logger) core.Queue {
	if log == nil {
		log = slog.Default()
	}
	return &receipts{Queue: q, outbox: outbox, log: log}
}

type receipts struct {
	core.Queue
	outbox Keeper
	log    *slog.Logger
}

// Reserve, Unreserve and Handoff are the queue's (core.Handoff); Reserve
// is false when it has none. A job handed over is a run's, which the
// outbox never keeps.
func (q *receipts) Reserve(backlog int) bool {
	h, ok := q.Queue.(core.Handoff)
	return ok && h.Reserve(backlog)
}

// Unreserve: see Reserve.
func (q *receipts) Unreserve() { q.Queue.(core.Handoff).Unreserve() }

// Handoff: see Reserve.
func (q *receipts) Handoff(j core.Job, consumer string, until time.Time) {
	q.Queue.(core.Handoff).Handoff(j, consumer, until)
}

// OldestDue is the queue's (core.QueueAger), the zero time when it cannot
// tell.
func (q *receipts) OldestDue(ctx context.Context) (time.Time, error) {
	if a, ok := q.Queue.(core.QueueAger); ok {
		return a.OldestDue(ctx)
	}
	return time.Time{}, nil
}

func (q *receipts) Ack(ctx context.Context, j core.Job) error {
	if err := q.Queue.Ack(ctx, j); err != nil {
		return err
	}
	q.done(ctx, j)
	return nil
}

func (q *receipts) Fail(ctx context.Context, j core.Job, reason string, retryAfter time.Duration) (bool, error) {
	dead, err := q.Queue.Fail(ctx, j, reason, retryAfter)
	if err == nil && dead {
		q.done(ctx, j) // kept in the dead letters of the queue
	}
	return dead, err
}

func (q *receipts) done(ctx context.Context, j core.Job) {
	if j.Kind == core.JobRun {
		return // never kept
	}
	if err := q.outbox.Done(ctx, j.ID); err != nil {
		q.log.Warn("relay: receipt not recorded; the job will be forwarded again", "job", j.ID, "kind", j.Kind, "err", err)
	}
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
