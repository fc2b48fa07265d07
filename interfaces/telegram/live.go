package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Live replies (chat.Platform's live half): while this node runs a chat
// run's model, the answer shows in the chat as it is written, in one
// message edited as it grows (chat.Live paces it); the reply job edits it
// into the answer's first part.

// thinkingNote is what a live message shows while nothing is written yet.
const thinkingNote = "…"

// typingLasts is how often the chat action is sent again: Telegram shows
// it for 5 seconds, or until the bot's next message.
const typingLasts = 4 * time.Second

// Typing implements chat.Typer: "typing…" in the chat (sendChatAction).
func (n *Notifier) Typing(ctx context.Context, _ core.Run, b core.Binding) (time.Duration, error) {
	chatID, err := ChatID(b.Channel)
	if err != nil {
		return 0, err
	}
	_, err = n.Client.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chatID, MessageThreadID: threadID(b.Thread),
		Action: models.ChatActionTyping})
	if err != nil {
		return 0, fmt.Errorf("telegram sendChatAction: %w", err)
	}
	return typingLasts, nil
}

var _ chat.Typer = (*Notifier)(nil)

// StartLive implements chat.Platform.
func (n *Notifier) StartLive(ctx context.Context, _ core.Run, b core.Binding, text string) (chat.LiveMessage, string, error) {
	chatID, err := ChatID(b.Channel)
	if err != nil {
		return nil, "", err
	}
	id, err := n.Client.Send(ctx, chatID, threadID(b.Thread), liveView(text, ""), nil)
	if err != nil {
		return nil, "", err
	}
	return n.live(chatID, id), strconv.Itoa(id), nil
}

// ResumeLive implements chat.Platform.
func (n *Notifier) ResumeLive(_ context.Context, b core.Binding, ref string) chat.LiveMessage {
	chatID, err := ChatID(b.Channel)
	id, _ := strconv.Atoi(ref)
	if err != nil || id == 0 {
		return nil
	}
	return n.live(chatID, id)
}

// live is message id in chatID, edited as the answer grows.
func (n *Notifier) live(chatID int64, id int) chat.EditedLive {
	return func(ctx context.Context, text, note string) error {
		return n.Client.Edit(ctx, chatID, id, liveView(text, note), nil)
	}
}

// liveView is what a live message shows of text (MarkdownV2): the start of
// it within Telegram's limit, then note (Markdown) in a paragraph of its own.
func liveView(text, note string) string {
	if strings.TrimSpace(text) == "" {
		text = thinkingNote
	}
	if parts := Split(text, MaxMessageLen-len(note)-8); len(parts) > 1 {
		text = parts[0] + " …"
	}
	text = Markdown(text)
	if note != "" {
		text += "\n\n" + Markdown(note)
	}
	return text
}
