package discord

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// JobReply is the job kind that posts a finished chat run's answer in its
// Discord thread. The engine enqueues it in the transaction that finishes
// the run (see Replier.OnFinish), so no answer is lost to a crash.
const JobReply = "discord.reply"

// ReplyStore is what the Replier reads and records.
type ReplyStore interface {
	GetRun(ctx context.Context, id string) (core.Run, error)
	GetSession(ctx context.Context, id string) (core.Session, error)
	chat.EventReader
	core.Outbox
}

// ReplierConfig configures a Replier.
type ReplierConfig struct {
	Store  ReplyStore // required
	Client *Client    // required
	Clock  core.Clock // default the system clock
	Logger *slog.Logger
	// LiveInterval is the least time between two edits of a live answer
	// (Progress); default and minimum 1s (Discord's pace for edits).
	LiveInterval time.Duration
}

// Replier posts finished runs' answers in their Discord conversations,
// split at 2,000 characters, and shows them live while they are written
// (Progress).
type Replier struct {
	cfg ReplierConfig
	sender
}

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
	cfg.LiveInterval = max(cfg.LiveInterval, time.Second)
	return &Replier{cfg: cfg, sender: sender{outbox: cfg.Store, client: cfg.Client, clock: cfg.Clock, log: cfg.Logger}}, nil
}

// OnFinish is the engine's finish hook: every chat run gets a JobReply job;
// its handler skips runs of other platforms.
func (r *Replier) OnFinish(run core.Run, _ core.RunStatus) []core.Job {
	return chat.ReplyJobs(JobReply, run)
}

// Handlers returns the engine job handlers of the replier.
func (r *Replier) Handlers() map[string]func(context.Context, core.Job) error {
	return map[string]func(context.Context, core.Job) error{JobReply: r.Handle}
}

// Handle posts the answer of the job's run, one message per 2,000
// characters, each through the outbox (a retried job skips the parts already
// sent and never posts again a part whose outcome is unknown). When the run
// showed live, the live message is edited into the first part. An error
// retries the job.
func (r *Replier) Handle(ctx context.Context, job core.Job) error {
	run, b, ok, err := chat.ReplyTarget(ctx, r.cfg.Store, job, chat.PlatformDiscord)
	if err != nil || !ok {
		return err
	}
	parts := Split(chat.ReplyText(run), MaxMessage)
	if len(parts) == 0 {
		return nil
	}
	key := "discord:reply:" + run.ID
	seg, err := chat.Segment(ctx, r.cfg.Store, run.ID)
	if err != nil {
		return err
	}
	if state, id, err := r.outbox.SendRef(ctx, liveKey(run.ID, seg)); err == nil && state == core.SendSent {
		// The live message becomes the first part.
		if err := r.finalize(ctx, key+":0", b.Channel, id, parts[0]); err != nil {
			return err
		}
		parts[0] = ""
	} else if err != nil && !errors.Is(err, core.ErrNotFound) {
		return err
	}
	for i, part := range parts {
		if part == "" {
			continue
		}
		if _, err := r.postOnce(ctx, key+":"+itoa(i), b.Channel, Message{Content: part}); err != nil {
			return err
		}
	}
	return nil
}

// finalize edits the live message id into text once, recording it under key.
func (r *Replier) finalize(ctx context.Context, key, channel, id, text string) error {
	claimed, _, err := r.outbox.ClaimSend(ctx, key, r.now())
	if err != nil || !claimed {
		return err // done (or begun) before
	}
	if err := r.cfg.Client.Edit(ctx, channel, id, Message{Content: text}); err != nil {
		return errors.Join(err, r.outbox.SetSendState(ctx, key, core.SendFailed, "", r.now()))
	}
	return r.outbox.SetSendState(ctx, key, core.SendSent, id, r.now())
}

// liveKey names the live message of a run's segment (chat.Segment).
func liveKey(runID string, segment int) string { return "discord:live:" + runID + ":" + itoa(segment) }
