package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tracing"
)

// JobReply is the job kind that answers a finished chat run in its
// conversation. The engine enqueues one per chat run, in the transaction
// that finishes it (Replies.OnFinish), so no answer is lost to a crash; its
// handler hands the answer to the run's platform.
const JobReply = "chat.reply"

// legacyReplyKinds are the per-platform reply jobs of earlier releases. A
// store upgraded with some still queued gets them handled like JobReply (a
// second one for the same run finds its messages sent and posts nothing).
var legacyReplyKinds = []string{"slack.reply", "discord.reply", "telegram.reply"}

// replyJob is the payload of a reply job.
type replyJob struct {
	RunID string `json:"run_id"`
}

// Answer is a finished chat run's answer, handed to its platform.
type Answer struct {
	Run     core.Run
	Binding core.Binding
	// Text is the answer in Markdown (ReplyText): never empty.
	Text string
	// Live is the ref of the live message of the run's last segment, as
	// the platform's StartLive returned it, when that message was posted;
	// the answer then replaces it. Empty when there is none.
	Live string
	// Files are the files the run's tools returned, with their bytes: the
	// platform uploads each below the answer, once.
	Files []core.File
}

// Platform is what a chat adapter gives the reply pipeline: its wire
// format. The pipeline (Replies, Live) reads the run, routes it, keeps the
// outbox of live messages and paces them; the platform renders and calls
// its API.
type Platform interface {
	// Reply posts a's answer in its conversation, each message through
	// the outbox, once; an error retries the job.
	Reply(ctx context.Context, a Answer) error
	// LiveKey names the outbox entry of the live message of segment seg
	// (see segment) of run runID.
	LiveKey(runID string, seg int) string
	// StartLive posts the live message of run in b, showing text (the
	// answer so far; "" while nothing is written), and returns the
	// message and its ref. An error for which MaybePosted is true leaves
	// the message's outcome unknown: it then gets nothing more.
	StartLive(ctx context.Context, run core.Run, b core.Binding, text string) (LiveMessage, string, error)
	// ResumeLive goes on with the live message ref that an earlier attempt
	// at the same segment posted (a step retried, a node gone); its text is
	// unknown. Nil when it cannot be resumed.
	ResumeLive(ctx context.Context, b core.Binding, ref string) LiveMessage
	// MaybePosted reports whether a failed post may have posted all the same.
	MaybePosted(err error) bool
}

// Typer is a Platform that can show that the agent is at work in a
// conversation (Slack's assistant thread status, Discord's typing
// indicator, Telegram's chat action). chat.Live calls it once the run has
// worked for a LiveInterval, then again every again it returns (0: never),
// until the run stops. It is best effort: an error only stops it for the run.
type Typer interface {
	Typing(ctx context.Context, run core.Run, b core.Binding) (again time.Duration, err error)
}

// LiveMessage is one live message a Platform shows.
type LiveMessage interface {
	// Show brings the message up to date with text, everything the model
	// wrote so far; one platform call at most.
	Show(ctx context.Context, text string) error
	// End shows text followed by note (Markdown, its own paragraph) and
	// ends the message.
	End(ctx context.Context, text, note string) error
}

// EditedLive is a live message whose every update is one edit of it to
// text and note ("" while it is written).
type EditedLive func(ctx context.Context, text, note string) error

// Show implements LiveMessage.
func (e EditedLive) Show(ctx context.Context, text string) error { return e(ctx, text, "") }

// End implements LiveMessage.
func (e EditedLive) End(ctx context.Context, text, note string) error { return e(ctx, text, note) }

// ReplyStore is what the reply pipeline reads and records; core.Store is one.
type ReplyStore interface {
	RunSessions
	EventReader
	core.Outbox
}

// RepliesConfig configures Replies.
type RepliesConfig struct {
	Store ReplyStore // required
	// Platforms are the configured adapters by platform name
	// (PlatformSlack, …). A run of another platform gets no answer.
	Platforms map[string]Platform
	Clock     core.Clock
	Logger    *slog.Logger
	// LiveInterval is the pace of live messages: one shows once a run
	// has taken LiveInterval (a quicker answer is simply posted), then
	// takes at most one call per LiveInterval. Default 1s, the pace
	// Slack, Discord and Telegram allow for one conversation.
	LiveInterval time.Duration
	// LiveCloseTimeout is how long the end of a live message waits for a
	// platform call in flight before abandoning it: the run's change
	// (finish, pause) waits that long at most. Default 5s.
	LiveCloseTimeout time.Duration
	// Blobs holds the files tools return; nil: none are uploaded.
	Blobs core.Blobs
	// Ticker paces live messages; tests replace it. Default time.NewTicker.
	Ticker func(d time.Duration) (<-chan time.Time, func())
}

// Replies answers finished chat runs in their conversations and shows them
// live while they are written, for every platform, once.
type Replies struct {
	cfg RepliesConfig
}

// NewReplies checks cfg and returns the pipeline.
func NewReplies(cfg RepliesConfig) (*Replies, error) {
	if cfg.Store == nil {
		return nil, errors.New("chat: replies need a store")
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LiveInterval <= 0 {
		cfg.LiveInterval = time.Second
	}
	if cfg.LiveCloseTimeout <= 0 {
		cfg.LiveCloseTimeout = 5 * time.Second
	}
	if cfg.Ticker == nil {
		cfg.Ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	return &Replies{cfg: cfg}, nil
}

// OnFinish is the engine's finish hook (core.EngineConfig.OnFinish): a
// chat run gets one reply job.
func (p *Replies) OnFinish(run core.Run, _ core.RunStatus) []core.Job {
	if run.Type != core.RunTypeChat || len(p.cfg.Platforms) == 0 {
		return nil
	}
	if c := run.Conversation; c.Platform != "" && p.cfg.Platforms[c.Platform] == nil {
		return nil // a platform this gateway does not serve
	}
	payload, _ := json.Marshal(replyJob{RunID: run.ID}) // strings always marshal
	return []core.Job{{Kind: JobReply, Key: JobReply + ":" + run.ID, Payload: payload}}
}

// Handlers returns the engine job handlers of the pipeline.
func (p *Replies) Handlers() map[string]func(context.Context, core.Job) error {
	h := map[string]func(context.Context, core.Job) error{JobReply: p.Handle}
	for _, kind := range legacyReplyKinds {
		h[kind] = p.Handle
	}
	return h
}

// Handle runs a reply job: it reads the finished run and its conversation
// and hands the answer, with the live message it replaces, to the run's
// platform.
func (p *Replies) Handle(ctx context.Context, job core.Job) error {
	var payload replyJob
	if err := json.Unmarshal(job.Payload, &payload); err != nil {
		return core.Permanent(fmt.Errorf("reply job %s: %w", job.ID, err))
	}
	st := p.cfg.Store
	run, err := st.GetRun(ctx, payload.RunID)
	if err != nil {
		return err
	}
	if !run.Status.Terminal() {
		return fmt.Errorf("reply: run %s is %s, not finished", run.ID, run.Status)
	}
	b, err := Conversation(ctx, st, run)
	if err != nil {
		return err
	}
	plat := p.cfg.Platforms[b.Platform]
	text := ReplyText(run)
	if plat == nil || b.Channel == "" || text == "" {
		return nil
	}
	evs, err := st.Events(ctx, run.ID, 0, 0)
	if err != nil {
		return err
	}
	a := Answer{Run: run, Binding: b, Text: text}
	if a.Files, err = p.files(ctx, evs); err != nil {
		return err
	}
	seg := segment(evs)
	state, ref, err := st.SendRef(ctx, plat.LiveKey(run.ID, seg))
	switch {
	case errors.Is(err, core.ErrNotFound):
	case err != nil:
		return err
	case state == core.SendSent:
		a.Live = ref
	case state != core.SendFailed:
		p.cfg.Logger.Warn(b.Platform+" live message outcome unknown; posting the answer as a new message", "run", run.ID, "state", state)
	}
	ctx, span := tracing.Start(ctx, run.ID, tracing.SpanChatPost, attribute.String("agentgate.platform", b.Platform),
		attribute.String("agentgate.post", "reply"))
	err = plat.Reply(ctx, a)
	tracing.End(span, err)
	return err
}

// Conversation is where run was asked: as recorded with it, or, for a run
// stored before that was, its session's binding.
func Conversation(ctx context.Context, st SessionGetter, run core.Run) (core.Binding, error) {
	if run.Conversation.Platform != "" {
		return run.Conversation, nil
	}
	sess, err := st.GetSession(ctx, run.SessionID)
	return sess.Binding, err
}

// RunSessions reads runs and sessions; core.Store is one.
type RunSessions interface {
	GetRun(ctx context.Context, id string) (core.Run, error)
	GetSession(ctx context.Context, id string) (core.Session, error)
}

// EventReader reads a run's journal; core.Store is one.
type EventReader interface {
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]core.Event, error)
}

// segment is the number of approvals a run with journal evs has asked for
// so far. A live answer shows one message per segment: what the run says
// after a decision comes below the approval card, not in the message above
// it.
func segment(evs []core.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == core.EventApprovalRequested {
			n++
		}
	}
	return n
}

// files are the stored files the run's tools returned, in order, with
// their bytes; one no longer stored is left out (and logged).
func (p *Replies) files(ctx context.Context, evs []core.Event) ([]core.File, error) {
	if p.cfg.Blobs == nil {
		return nil, nil
	}
	var out []core.File
	for _, ev := range evs {
		if ev.Type != core.EventToolResult {
			continue
		}
		var res core.ToolResult
		if err := json.Unmarshal(ev.Data, &res); err != nil {
			return nil, fmt.Errorf("reply: tool result of run %s: %w", ev.RunID, err)
		}
		for _, a := range res.Files {
			if a.ID == "" {
				continue
			}
			data, err := p.cfg.Blobs.GetBlob(ctx, a.ID)
			if errors.Is(err, core.ErrNotFound) {
				p.cfg.Logger.Warn("a file the run returned is no longer stored; not uploaded", "run", ev.RunID, "file", a.Name)
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, core.File{Attachment: a, Data: data})
		}
	}
	return out, nil
}

// ErrGone is an edit's failure because the message is no longer there
// (deleted) or can no longer be edited (too old): Finalize posts anew.
var ErrGone = errors.New("the message is gone")

// Finalize makes a live message the first message of an answer, once: edit
// runs unless the entry key says an earlier attempt did. An edit whose
// outcome is unknown is made again (it cannot double anything). An edit
// that fails with ErrGone (someone deleted the live message) is replaced by
// post, once (PostOnce under key:anew): a post whose outcome is unknown is
// not made again, so the answer is neither lost nor doubled.
func (s Sender) Finalize(ctx context.Context, key, ref string,
	edit func(context.Context) error, post func(context.Context) (string, error)) error {
	ob := s.Outbox
	claimed, state, err := ob.ClaimSend(ctx, key, s.Now())
	if err != nil {
		return err
	}
	if !claimed && state == core.SendSent {
		return nil
	}
	err = edit(ctx)
	if errors.Is(err, ErrGone) {
		var sent Sent
		sent, err = s.PostOnce(ctx, key+":anew", post)
		ref = sent.Ref // "" when it may have been posted: done, as far as we can tell
	}
	if err != nil { // left claimable: the edit (or post) can be made again
		return errors.Join(err, ob.SetSendState(ctx, key, core.SendFailed, "", s.Now()))
	}
	return ob.SetSendState(ctx, key, core.SendSent, ref, s.Now())
}
