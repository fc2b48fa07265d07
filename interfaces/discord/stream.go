package discord

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Live answers (chat.Platform's live half): a chat run of a Discord
// conversation shows its answer while the model writes it, in one message
// edited as it grows (chat.Live paces it), cut at 2,000 characters; the
// reply job edits it into the final answer.

// thinkingNote is what a live message shows while nothing is written yet.
const thinkingNote = "_Thinking…_"

// StartLive implements chat.Platform.
func (n *Notifier) StartLive(ctx context.Context, _ core.Run, b core.Binding, text string) (chat.LiveMessage, string, error) {
	id, err := n.Client.Post(ctx, b.Channel, Message{Content: liveText(text, "")})
	if err != nil {
		return nil, "", err
	}
	return n.live(b.Channel, id), id, nil
}

// ResumeLive implements chat.Platform.
func (n *Notifier) ResumeLive(_ context.Context, b core.Binding, ref string) chat.LiveMessage {
	if ref == "" {
		return nil
	}
	return n.live(b.Channel, ref)
}

// live is message id in channel, edited as the answer grows.
func (n *Notifier) live(channel, id string) chat.EditedLive {
	return func(ctx context.Context, text, note string) error {
		return n.Client.Edit(ctx, channel, id, Message{Content: liveText(text, note)})
	}
}

// typingLasts is how often the typing indicator is shown again: Discord
// shows it for about 10 seconds.
const typingLasts = 8 * time.Second

// Typing implements chat.Typer.
func (n *Notifier) Typing(ctx context.Context, _ core.Run, b core.Binding) (time.Duration, error) {
	return typingLasts, n.Client.Typing(ctx, b.Channel)
}

// liveText is what a live message shows of text: the start of it within
// Discord's limit, then note.
func liveText(text, note string) string {
	text = strings.TrimSpace(text)
	if text == "" && note == "" {
		return thinkingNote
	}
	if limit := MaxMessage - utf8.RuneCountInString(note) - 4; utf8.RuneCountInString(text) > limit {
		text = string([]rune(text)[:limit]) + " …"
	}
	return chat.JoinNote(text, note)
}
