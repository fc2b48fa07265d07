package slack

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// JobReply is the job kind that posts a finished chat run's answer in its
// Slack thread. The engine enqueues it in the transaction that finishes the
// run (see Replier.OnFinish), so no answer is lost to a crash.
const JobReply = "slack.reply"

// ReplyStore is what the Replier reads and records.
type ReplyStore interface {
	GetRun(ctx context.Context, id string) (core.Run, error)
	GetSession(ctx context.Context, id string) (core.Session, error)
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]core.Event, error)
	core.Outbox
}

// ReplierConfig configures a Replier.
type ReplierConfig struct {
	Store  ReplyStore // required
	Client *Client    // required
	Clock  core.Clock // default the system clock
	Logger *slog.Logger
	// Live paces the answers shown while the model writes them (Progress).
	Live LiveConfig
}

// Replier posts finished runs' answers in their Slack threads, and shows
// them live while they are written (Progress).
type Replier struct {
	cfg ReplierConfig
	sender
	ticker        tickerFunc // paces live replies; tests replace it
	streamRefused sync.Map   // channel → true: Slack refused chat.startStream there
}

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
	if cfg.Live.Interval <= 0 {
		cfg.Live.Interval = time.Second
	}
	if cfg.Live.CloseTimeout <= 0 {
		cfg.Live.CloseTimeout = 5 * time.Second
	}
	return &Replier{
		cfg:    cfg,
		sender: sender{outbox: cfg.Store, client: cfg.Client, clock: cfg.Clock, log: cfg.Logger},
		ticker: realTicker,
	}, nil
}

// OnFinish is the engine's finish hook (core.EngineConfig.OnFinish): every
// chat run gets a JobReply job; its handler skips runs of other platforms.
func (r *Replier) OnFinish(run core.Run, _ core.RunStatus) []core.Job {
	return chat.ReplyJobs(JobReply, run)
}

// Handlers returns the engine job handlers of the replier.
func (r *Replier) Handlers() map[string]func(context.Context, core.Job) error {
	return map[string]func(context.Context, core.Job) error{JobReply: r.Handle}
}

// Handle posts the answer of the job's run, one Slack message per chunk.
// Each chunk goes through the outbox: the intent is recorded before
// chat.postMessage and the ts after it. A retried job skips the chunks
// already sent, and never posts again a chunk whose earlier outcome is
// unknown (it is marked uncertain and logged): a missing chunk is better
// than a doubled answer. When the run showed live (Progress), its live
// message is edited into the first chunk instead. An error retries the job.
func (r *Replier) Handle(ctx context.Context, job core.Job) error {
	run, b, ok, err := chat.ReplyTarget(ctx, r.cfg.Store, job, chat.PlatformSlack)
	if err != nil || !ok {
		return err
	}
	text := chat.ReplyText(run)
	if text == "" {
		return nil
	}
	live, err := r.liveMessage(ctx, run.ID)
	if err != nil {
		return err
	}
	for i, sections := range Messages(Mrkdwn(text)) {
		key := "slack:reply:" + run.ID + ":" + strconv.Itoa(i)
		body, blocks := strings.Join(sections, "\n\n"), sectionBlocks(sections)
		if i == 0 && live != nil {
			err = r.finalize(ctx, key, b, *live, body, blocks)
		} else {
			_, err = r.postOnce(ctx, key, b.Channel, b.Thread, body, blocks)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func sectionBlocks(sections []string) []slackapi.Block {
	blocks := make([]slackapi.Block, len(sections))
	for i, s := range sections {
		blocks[i] = slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, false), nil, nil)
	}
	return blocks
}
