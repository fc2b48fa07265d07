package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Live replies (chat.Platform's live half): a chat run in a Slack thread
// shows as it is written in a message streamed with chat.startStream and
// chat.appendStream, or, where Slack refuses to stream, a "Thinking…"
// message edited with chat.update as the answer grows. chat.Live paces and
// records it; the reply job turns it into the answer.

// maxStreamText is the most Markdown chat.startStream, chat.appendStream and
// chat.stopStream take in one call.
const maxStreamText = 12_000

// thinkingNote is the placeholder posted while nothing is written yet, when
// Slack refuses to stream.
const thinkingNote = "_Thinking…_"

// thinkingBlocks is the placeholder's blocks.
func thinkingBlocks() []slackapi.Block {
	return []slackapi.Block{slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType, thinkingNote, false, false))}
}

// LiveKey implements chat.Platform. Segment n is the run after its n-th
// pause for an approval: each segment shows in a message of its own, so the
// answer that follows an approval comes after its card.
func (c *Notifier) LiveKey(runID string, segment int) string {
	key := "slack:reply:" + runID + ":stream"
	if segment > 0 {
		key += ":" + strconv.Itoa(segment)
	}
	return key
}

// liveRef is the outbox ref of a live message: its ts and whether it was
// started with chat.startStream ("stream:<ts>") or posted ("post:<ts>").
type liveRef struct {
	ts     string
	stream bool
}

func (l liveRef) String() string {
	if l.stream {
		return "stream:" + l.ts
	}
	return "post:" + l.ts
}

func parseLiveRef(s string) (liveRef, bool) {
	kind, ts, ok := strings.Cut(s, ":")
	if !ok || ts == "" || (kind != "stream" && kind != "post") {
		return liveRef{}, false
	}
	return liveRef{ts: ts, stream: kind == "stream"}, true
}

// finalize makes the live message m the first message of the answer. Unlike
// a post, an edit is made again when an earlier attempt's outcome is
// unknown: it cannot double anything.
func (c *Notifier) finalize(ctx context.Context, key string, b core.Binding, m liveRef, text string, blocks []slackapi.Block) error {
	return c.Sender.Finalize(ctx, key, m.ts, func(ctx context.Context) error {
		if m.stream {
			// Slack refuses to stop a stream that ended already (an earlier
			// attempt, a pause, its own timeout): nothing to do then.
			if err := c.Client.StopStream(ctx, b.Channel, m.ts, "", nil); err != nil && ctx.Err() != nil {
				return err
			}
		}
		err := c.Client.Update(ctx, b.Channel, m.ts, text, blocks)
		if refusedWith(err, "message_not_found", "cant_update_message") {
			c.Logger.Warn("slack live reply cannot be edited; posting the answer anew", "run_key", key, "err", err)
			return fmt.Errorf("%w: %w", chat.ErrGone, err)
		}
		return err
	}, func(ctx context.Context) (string, error) {
		return c.Client.Post(ctx, b.Channel, b.Thread, text, blocks)
	})
}

// refusedWith reports whether err is a refusal from Slack with one of codes.
func refusedWith(err error, codes ...string) bool {
	apiErr, ok := errors.AsType[*APIError](err)
	return ok && slices.Contains(codes, apiErr.Code)
}

// liveMsg is a live message in a Slack thread.
type liveMsg struct {
	c    *Notifier
	b    core.Binding
	ref  liveRef
	edit bool // replace the text with chat.update (a posted message, or a stream taken over)
	sent int  // bytes of the text streamed so far
}

// ResumeLive implements chat.Platform: the message is edited from now on.
func (c *Notifier) ResumeLive(ctx context.Context, b core.Binding, ref string) chat.LiveMessage {
	lr, ok := parseLiveRef(ref)
	if !ok {
		return nil
	}
	if lr.stream {
		_ = c.Client.StopStream(ctx, b.Channel, lr.ts, "", nil) // refused when it ended already
	}
	return &liveMsg{c: c, b: b, ref: lr, edit: true}
}

// StartLive implements chat.Platform: a stream in the thread, or a posted
// message when Slack refuses to stream there.
func (c *Notifier) StartLive(ctx context.Context, run core.Run, b core.Binding, text string) (chat.LiveMessage, string, error) {
	m, err := c.startStream(ctx, run, b, text)
	if m == nil && err == nil {
		m = &liveMsg{c: c, b: b, edit: true}
		body, blocks := thinkingNote, thinkingBlocks()
		if text != "" {
			body, blocks = firstMessage(text)
		}
		m.ref.ts, err = c.Client.Post(ctx, b.Channel, b.Thread, body, blocks)
	}
	if err != nil {
		return nil, "", err
	}
	return m, m.ref.String(), nil
}

// startStream opens a stream in the thread with the text so far; nil, nil
// when Slack refuses to stream there (the app is not an AI app, the method
// is unknown, the conversation does not allow it). A refusal is remembered
// for the channel until the process restarts.
func (c *Notifier) startStream(ctx context.Context, run core.Run, b core.Binding, text string) (*liveMsg, error) {
	if _, refused := c.streamRefused.Load(b.Channel); refused || b.Thread == "" {
		return nil, nil
	}
	first, markdown := streamPiece(text)
	ts, err := c.Client.StartStream(ctx, StreamTarget{
		Channel: b.Channel, ThreadTS: b.Thread, RecipientUserID: run.UserID, RecipientTeamID: b.Workspace,
	}, markdown)
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		c.Logger.Info("slack refused to stream; posting and editing instead", "channel", b.Channel, "err", err)
		c.streamRefused.Store(b.Channel, true)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &liveMsg{c: c, b: b, ref: liveRef{ts: ts, stream: true}, sent: len(first)}, nil
}

// Show implements chat.LiveMessage with one call.
func (m *liveMsg) Show(ctx context.Context, text string) error {
	if m.edit {
		body, blocks := firstMessage(text)
		return m.c.Client.Update(ctx, m.b.Channel, m.ref.ts, body, blocks)
	}
	rest := text[m.sent:]
	if rest == "" {
		return nil
	}
	piece, markdown := streamPiece(rest)
	if err := m.c.Client.AppendStream(ctx, m.b.Channel, m.ref.ts, markdown); err != nil {
		return err
	}
	m.sent += len(piece)
	return nil
}

// End implements chat.LiveMessage: everything written, then note, and the
// stream ended.
func (m *liveMsg) End(ctx context.Context, text, note string) error {
	full := chat.JoinNote(text, note)
	if m.edit {
		body, blocks := firstMessage(full)
		return m.c.Client.Update(ctx, m.b.Channel, m.ref.ts, body, blocks)
	}
	rest := full[m.sent:]
	for {
		piece, markdown := streamPiece(rest)
		if len(piece) == len(rest) {
			return m.c.Client.StopStream(ctx, m.b.Channel, m.ref.ts, markdown, nil)
		}
		if err := m.c.Client.AppendStream(ctx, m.b.Channel, m.ref.ts, markdown); err != nil {
			return err
		}
		rest = rest[len(piece):]
	}
}

// streamPiece is the longest start of the Markdown md that fits one
// chat.startStream, chat.appendStream or chat.stopStream call, and the text
// to send for it: with its mentions made inert.
func streamPiece(md string) (piece, markdown string) {
	limit := maxStreamText
	for {
		piece = md[:chat.Prefix(md, limit, chat.UTF16)]
		markdown = inertMentions(piece)
		over := textLen(markdown) - maxStreamText
		if over <= 0 || len(piece) == 0 {
			return piece, markdown
		}
		limit = textLen(piece) - over
	}
}

// inertMentions puts a zero-width space after each "<" of streamed Markdown
// that opens a mention — <!channel>, <!here>, <!subteam^…>, <@U123>,
// <#C123> — or ends the piece (the next piece may go on with "!channel>").
// Slack does not document whether markdown_text parses its mention syntax,
// and the model's text (a user can ask for one) must not ping anyone; the
// space does not show, where "&lt;" might show as is in Markdown. The
// answer's final message is rendered by Mrkdwn, escaped.
func inertMentions(md string) string {
	if !strings.Contains(md, "<") {
		return md
	}
	var b strings.Builder
	b.Grow(len(md) + len(zeroWidthSpace)*strings.Count(md, "<"))
	for i := range len(md) {
		b.WriteByte(md[i])
		if md[i] == '<' && (i+1 == len(md) || strings.IndexByte("!@#", md[i+1]) >= 0) {
			b.WriteString(zeroWidthSpace)
		}
	}
	return b.String()
}

// firstMessage renders Markdown as the first Slack message of an answer:
// its mrkdwn text and section blocks.
func firstMessage(md string) (string, []slackapi.Block) {
	msgs := Messages(Mrkdwn(md))
	if len(msgs) == 0 {
		return "", nil
	}
	return strings.Join(msgs[0], "\n\n"), sectionBlocks(msgs[0])
}

// thinkingStatus is the assistant thread status shown while a run works.
const thinkingStatus = "is thinking…"

// Typing implements chat.Typer: the assistant thread status, which Slack
// shows until the app replies in the thread. Where Slack refuses it (not an
// AI app's thread), it is not asked again in the channel until the process
// restarts.
func (c *Notifier) Typing(ctx context.Context, _ core.Run, b core.Binding) (time.Duration, error) {
	if b.Thread == "" {
		return 0, nil
	}
	if _, refused := c.statusRefused.Load(b.Channel); refused {
		return 0, nil
	}
	err := c.Client.SetStatus(ctx, b.Channel, b.Thread, thinkingStatus)
	if _, refused := errors.AsType[*APIError](err); refused {
		c.statusRefused.Store(b.Channel, true)
	}
	return 0, err
}
