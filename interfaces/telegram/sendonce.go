package telegram

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// sender posts messages through the outbox, once (chat.Sender): the intent
// is recorded before sendMessage and the message id after it.
type sender struct {
	outbox core.Outbox
	client *Client
	clock  core.Clock
	log    *slog.Logger
}

// postOnce posts text (MarkdownV2) unless an earlier attempt under key did
// or may have; the result's Ref is the message id.
func (s sender) postOnce(ctx context.Context, key string, chatID int64, thread int, text string, markup models.ReplyMarkup) (chat.Sent, error) {
	return s.postOnceOr(ctx, key, chatID, thread, text, text, markup)
}

// postOnceOr is postOnce posting plain (text naming nobody by link) instead
// should Telegram refuse a mention in text.
func (s sender) postOnceOr(ctx context.Context, key string, chatID int64, thread int, text, plain string, markup models.ReplyMarkup) (chat.Sent, error) {
	once := s.once()
	return once.PostOnce(ctx, key, func(ctx context.Context) (string, error) {
		var id int
		err := withoutMentions(text, plain, func(text string) (err error) {
			id, err = s.client.Send(ctx, chatID, thread, text, markup)
			return err
		})
		return strconv.Itoa(id), err
	})
}

// once is the outbox's post-once for this platform.
func (s sender) once() chat.Sender {
	return chat.Sender{Outbox: s.outbox, Clock: s.clock, Logger: s.log, Platform: chat.PlatformTelegram,
		MaybePosted: func(err error) bool { return errors.Is(err, ErrMaybePosted) }}
}

func (s sender) now() time.Time { return s.clock.Now().UTC() }
