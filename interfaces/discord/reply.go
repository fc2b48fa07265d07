package discord

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// ReplyStore is what the Replier reads and records.
type ReplyStore interface {
	core.Outbox
}

// ReplierConfig configures a Replier.
type ReplierConfig struct {
	Store  ReplyStore // required
	Client *Client    // required
	Clock  core.Clock // default the system clock
	Logger *slog.Logger
}

// Replier is Discord's chat.Platform: it posts finished runs' answers in
// their Discord conversations, split at 2,000 characters, and shows them
// live while they are written.
type Replier struct {
	cfg ReplierConfig
	sender
}

var (
	_ chat.Platform = (*Replier)(nil)
	_ chat.Typer    = (*Replier)(nil)
)

// NewReplier checks cfg and returns the replier.
func NewReplier(cfg ReplierConfig) (*Replier, error) {
	if cfg.Store == nil || cfg.Client == nil {
		return nil, errors.New("discord: the replier needs a store and a client")
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Replier{cfg: cfg, sender: sender{outbox: cfg.Store, client: cfg.Client, clock: cfg.Clock, log: cfg.Logger}}, nil
}

// Reply implements chat.Platform: one message per 2,000 characters, each
// through the outbox (a retried job skips the parts already sent and never
// posts again a part whose outcome is unknown). When the run showed live,
// the live message is edited into the first part. Files the run's tools
// returned follow as attachments, each once. An error retries the job.
func (r *Replier) Reply(ctx context.Context, a chat.Answer) error {
	parts := Split(a.Text, MaxMessage)
	key, channel := "discord:reply:"+a.Run.ID, a.Binding.Channel
	for i, part := range parts {
		var err error
		if i == 0 && a.Live != "" { // the live message becomes the first part
			err = chat.Finalize(ctx, r.outbox, r.clock, key+":0", a.Live, func(ctx context.Context) error {
				return r.cfg.Client.Edit(ctx, channel, a.Live, Message{Content: part})
			})
		} else {
			_, err = r.postOnce(ctx, key+":"+itoa(i), channel, Message{Content: part})
		}
		if err != nil {
			return err
		}
	}
	return r.once().Upload(ctx, key, a.Files, func(ctx context.Context, f core.File) (string, error) {
		return r.cfg.Client.PostFile(ctx, channel, f.Name, f.Data, "")
	})
}

// LiveKey implements chat.Platform.
func (r *Replier) LiveKey(runID string, segment int) string {
	return "discord:live:" + runID + ":" + itoa(segment)
}
