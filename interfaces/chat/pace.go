package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Pacer keeps a platform client's calls within the platform's rate limits:
// calls that post in one place (a Slack channel, a Telegram chat) take
// turns by that place's limiters, and a call the platform answers "too
// many requests" waits as long as it says and is made again — while every
// other call to the same place waits too, instead of earning 429s of its
// own.
type Pacer struct {
	// Limits makes the limiters of a place the first time it is used; nil
	// paces nothing (429s are still waited out).
	Limits func(key string) []*rate.Limiter
	// Retries is how many 429s one call waits out before it fails.
	Retries int
	// RetryAfter reports whether err is the platform's 429 and how long it
	// asked to wait.
	RetryAfter func(err error) (time.Duration, bool)
	Platform   string // names the platform in logs and errors
	Logger     *slog.Logger
	// Now and Sleep are the clock; nil is the system's. Sleep waits d or
	// until ctx ends.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error

	mu     sync.Mutex
	places map[string]*place
}

type place struct {
	limiters []*rate.Limiter
	paused   time.Time // until when a 429 holds every call here back
}

// ErrNotSent is in the errors of calls Pacer.Call did not make (its
// context ended while it waited its turn) or that the platform refused as
// too many: nothing was done.
var ErrNotSent = errors.New("not sent")

// Call makes do, in turn at key's place ("" for a call that posts nowhere:
// not paced), waiting out the 429s it gets, at most Retries of them.
func (p *Pacer) Call(ctx context.Context, key string, do func(context.Context) error) error {
	for limited := 0; ; limited++ {
		if err := p.wait(ctx, key); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		err := do(ctx)
		wait, ok := p.RetryAfter(err)
		if err == nil || !ok {
			return err
		}
		if limited >= p.Retries {
			return fmt.Errorf("%w: still rate limited after %d retries: %w", ErrNotSent, p.Retries, err)
		}
		p.log().Warn(p.Platform+" rate limited; waiting", "key", key, "retry_after", wait)
		p.pause(key, wait)
		if key == "" {
			if err := p.Delay(ctx, wait); err != nil {
				return fmt.Errorf("%w: waiting out a rate limit: %w", ErrNotSent, err)
			}
		}
	}
}

// wait blocks until key's limiters and pause let one more call through, or
// ctx ends.
func (p *Pacer) wait(ctx context.Context, key string) error {
	if key == "" {
		return nil
	}
	now := p.now()
	p.mu.Lock()
	if p.places == nil {
		p.places = map[string]*place{}
	}
	pl := p.places[key]
	if pl == nil {
		pl = &place{}
		if p.Limits != nil {
			pl.limiters = p.Limits(key)
		}
		p.places[key] = pl
	}
	wait := pl.paused.Sub(now)
	reserved := make([]*rate.Reservation, 0, len(pl.limiters))
	for _, l := range pl.limiters {
		r := l.ReserveN(now, 1)
		reserved = append(reserved, r)
		wait = max(wait, r.DelayFrom(now))
	}
	p.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	if err := p.Delay(ctx, wait); err != nil {
		for _, r := range reserved {
			r.CancelAt(p.now())
		}
		return fmt.Errorf("%w: waiting for a turn: %w", ErrNotSent, err)
	}
	return nil
}

// pause holds every call at key back for d.
func (p *Pacer) pause(key string, d time.Duration) {
	if key == "" {
		return
	}
	until := p.now().Add(d)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl := p.places[key]; pl != nil && until.After(pl.paused) {
		pl.paused = until
	}
}

func (p *Pacer) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// Delay waits d by the pacer's clock, or until ctx ends.
func (p *Pacer) Delay(ctx context.Context, d time.Duration) error {
	if p.Sleep == nil {
		return SleepCtx(ctx, d)
	}
	return p.Sleep(ctx, d)
}

func (p *Pacer) log() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// SleepCtx waits d, or until ctx ends (its error).
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
