package slack

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	slackapi "github.com/slack-go/slack"

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

// Replier is Slack's chat.Platform: it posts finished runs' answers in
// their Slack threads, and shows them live while they are written.
type Replier struct {
	cfg ReplierConfig
	sender
	streamRefused sync.Map // channel → true: Slack refused chat.startStream there
	statusRefused sync.Map // channel → true: Slack refused assistant.threads.setStatus there
}

var (
	_ chat.Platform = (*Replier)(nil)
	_ chat.Typer    = (*Replier)(nil)
)

// NewReplier checks cfg and returns the replier.
func NewReplier(cfg ReplierConfig) (*Replier, error) {
	if cfg.Store == nil || cfg.Client == nil {
		return nil, errors.New("slack: replier needs a store and a client")
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Replier{cfg: cfg, sender: sender{outbox: cfg.Store, client: cfg.Client, clock: cfg.Clock, log: cfg.Logger}}, nil
}

// Reply implements chat.Platform: one Slack message per chunk of the
// answer. Each chunk goes through the outbox: the intent is recorded before
// chat.postMessage and the ts after it. A retried job skips the chunks
// already sent, and never posts again a chunk whose earlier outcome is
// unknown (it is marked uncertain and logged): a missing chunk is better
// than a doubled answer. When the run showed live, its live message is
// edited into the first chunk instead. Files the run's tools returned are
// uploaded below it (files.uploadV2), each once. An error retries the job.
func (r *Replier) Reply(ctx context.Context, a chat.Answer) error {
	live, isLive := parseLiveRef(a.Live)
	for i, sections := range Messages(Mrkdwn(a.Text)) {
		key := "slack:reply:" + a.Run.ID + ":" + strconv.Itoa(i)
		body, blocks := strings.Join(sections, "\n\n"), sectionBlocks(sections)
		var err error
		if i == 0 && isLive {
			err = r.finalize(ctx, key, a.Binding, live, body, blocks)
		} else {
			_, err = r.postOnce(ctx, key, a.Binding.Channel, a.Binding.Thread, body, blocks)
		}
		if err != nil {
			return err
		}
	}
	b := a.Binding
	return r.once().Upload(ctx, "slack:reply:"+a.Run.ID, a.Files, func(ctx context.Context, f core.File) (string, error) {
		return "", r.cfg.Client.Upload(ctx, b.Channel, b.Thread, f.Name, f.Name, f.Data)
	})
}

func sectionBlocks(sections []string) []slackapi.Block {
	blocks := make([]slackapi.Block, len(sections))
	for i, s := range sections {
		blocks[i] = slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, false), nil, nil)
	}
	return blocks
}
