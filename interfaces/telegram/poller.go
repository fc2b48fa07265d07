package telegram

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// Ingester stores an update durably; *Handler is one.
type Ingester interface {
	Ingest(ctx context.Context, u models.Update) error
}

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
	Logger  *slog.Logger
}

// Start polls until ctx ends.
func (p *Poller) Start(ctx context.Context) error {
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 25 * time.Second
	}
	var offset int64
	backoff := time.Second
	for ctx.Err() == nil {
		ups, err := p.Client.Updates(ctx, offset, timeout)
		if err == nil {
			for _, u := range ups {
				if err = p.Sink.Ingest(ctx, u); err != nil {
					break // not stored: ask for it again
				}
				offset = u.ID + 1
			}
		}
		if err == nil {
			backoff = time.Second
			continue
		}
		if ctx.Err() != nil {
			break
		}
		wait := backoff
		var tm *bot.TooManyRequestsError
		if errors.As(err, &tm) {
			wait = time.Duration(max(tm.RetryAfter, 1)) * time.Second
		}
		backoff = min(2*backoff, 30*time.Second)
		log.Warn("telegram polling", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}
