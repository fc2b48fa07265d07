package telegram

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Ingester stores an update durably; *Handler is one.
type Ingester interface {
	Ingest(ctx context.Context, u models.Update) error
}

// The poller's waits between getUpdates calls: after an empty answer that
// came back well before the long poll's timeout (a Bot API, proxy or fake
// that does not hold the poll), and after a failure, from minPollBackoff
// doubling up to maxPollBackoff until a call succeeds.
const (
	earlyEmptyPause = time.Second
	minPollBackoff  = time.Second
	maxPollBackoff  = 30 * time.Second
)

// Poller receives updates by long polling (getUpdates) when no webhook is
// configured. Run it on one replica (under a lease). An update is confirmed
// to Telegram (the next getUpdates' offset passes it) only after it is in
// the inbox: Telegram keeps the confirmed offset, so after a crash the
// unconfirmed updates come again and the inbox drops the ones it has
// (update_id dedupes).
type Poller struct {
	Client *Client
	Sink   Ingester
	// Timeout is the long poll's wait. Default 25s.
	Timeout time.Duration
	// Clock times the polls: an empty answer sooner than half of Timeout
	// is followed by a pause of a second, so a Bot API that answers at
	// once is not called in a busy loop. Default the system clock.
	Clock core.Clock
	// Sleep waits d, or until ctx ends, between calls; tests replace it.
	// Default a timer.
	Sleep  func(ctx context.Context, d time.Duration)
	Logger *slog.Logger
}

// Start polls until ctx ends. A failed call (or an update the sink could
// not store) is tried again after a backoff, from a second doubling up to
// 30s, reset by the next call that succeeds; a 429 waits its retry_after.
func (p *Poller) Start(ctx context.Context) error {
	log, clock := p.Logger, p.Clock
	chat.Defaults(&clock, &log)
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 25 * time.Second
	}
	sleep := p.Sleep
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) { _ = chat.SleepCtx(ctx, d) }
	}
	var offset int64
	backoff := minPollBackoff
	for ctx.Err() == nil {
		start := clock.Now()
		ups, err := p.Client.Updates(ctx, offset, timeout)
		if err == nil {
			for _, u := range ups {
				if err = p.Sink.Ingest(ctx, u); err != nil {
					break // not stored: ask for it again
				}
				offset = u.ID + 1
			}
		}
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			wait = backoff
			var ae *APIError
			if errors.As(err, &ae) && ae.RetryAfter > 0 {
				wait = ae.RetryAfter
			}
			backoff = min(2*backoff, maxPollBackoff)
			log.Warn("telegram polling", "err", err, "retry_in", wait)
		default:
			backoff = minPollBackoff
			if len(ups) == 0 && clock.Now().Sub(start) < timeout/2 {
				wait = earlyEmptyPause // the poll was not held: no busy loop
			}
		}
		if wait > 0 {
			sleep(ctx, wait)
		}
	}
	return nil
}
