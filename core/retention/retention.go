// Package retention removes what the store no longer keeps: finished runs
// and their journals, processed inbox messages, outbox records, dead
// letters and audit entries older than their configured age. It removes
// them oldest first, a small batch per write transaction, and waits after
// each batch Yield times as long as the batch took, so that it takes at
// most a twentieth of the store's time from live work.
package retention

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Yield is how many times a batch's time retention waits after it.
const Yield = 19

// Config configures a Pruner.
type Config struct {
	// Keep is how long each kind is kept; 0 or missing: forever.
	Keep map[core.Prunable]time.Duration
	// Targets remove what is due; each is asked for every kind (a store
	// and a separate queue each remove their own dead letters).
	Targets []core.Pruner
	// Every is the time between sweeps. Default 10m.
	Every time.Duration
	// Batch is the most one transaction removes. Default 100.
	Batch int
	// Clock tells the time. Default: the system clock.
	Clock core.Clock
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Pruned, when set, is told what each batch removed.
	Pruned func(what core.Prunable, n int)
}

// Pruner runs the sweeps.
type Pruner struct {
	cfg  Config
	wait func(ctx context.Context, d time.Duration) bool
}

// New returns a Pruner; it prunes only when Start or Sweep is called.
func New(cfg Config) *Pruner {
	if cfg.Every <= 0 {
		cfg.Every = 10 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pruner{cfg: cfg, wait: sleep}
}

// Enabled reports whether anything is ever pruned.
func (p *Pruner) Enabled() bool {
	for _, d := range p.cfg.Keep {
		if d > 0 {
			return true
		}
	}
	return false
}

// Start sweeps now and then every Every until ctx ends (under the
// retention lease: one replica prunes). It returns nil when ctx ends.
func (p *Pruner) Start(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	for {
		if _, err := p.Sweep(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("retention: sweep", "err", err)
		}
		if !p.wait(ctx, p.cfg.Every) {
			return nil
		}
	}
}

// Sweep removes everything due now and returns how much of each kind it
// removed. A failing kind is logged and left for the next sweep; the
// others go on.
func (p *Pruner) Sweep(ctx context.Context) (map[core.Prunable]int, error) {
	removed := map[core.Prunable]int{}
	var errs []error
	for _, what := range core.Prunables {
		keep := p.cfg.Keep[what]
		if keep <= 0 {
			continue
		}
		before := p.cfg.Clock.Now().Add(-keep)
		for _, t := range p.cfg.Targets {
			n, err := p.drain(ctx, t, what, before)
			removed[what] += n
			if err != nil {
				errs = append(errs, err)
			}
		}
		if n := removed[what]; n > 0 {
			p.cfg.Logger.Info("retention: pruned", "what", string(what), "count", n, "before", before)
		}
	}
	return removed, errors.Join(errs...)
}

// drain removes batches of what from t until fewer than a batch are due,
// waiting Yield times each batch's time after it.
func (p *Pruner) drain(ctx context.Context, t core.Pruner, what core.Prunable, before time.Time) (int, error) {
	total := 0
	for {
		start := time.Now()
		n, err := t.Prune(ctx, what, before, p.cfg.Batch)
		total += n
		if n > 0 && p.cfg.Pruned != nil {
			p.cfg.Pruned(what, n)
		}
		if err != nil || n < p.cfg.Batch {
			return total, err
		}
		if !p.wait(ctx, max(Yield*time.Since(start), time.Millisecond)) {
			return total, ctx.Err()
		}
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
