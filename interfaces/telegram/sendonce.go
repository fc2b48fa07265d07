package telegram

import (
	"context"
	"strconv"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// sender posts messages through the outbox, once (chat.Sender): the intent
// is recorded before sendMessage and the message id after it.
type sender chat.Poster[*Client]

// postOnce posts text (MarkdownV2) unless an earlier attempt under key did
// or may have; the result's Ref is the message id.
func (s sender) postOnce(ctx context.Context, key string, chatID int64, thread int, text string, markup models.ReplyMarkup) (chat.Sent, error) {
	return s.postOnceOr(ctx, key, chatID, thread, text, text, markup)
}

// postOnceOr is postOnce posting plain (text naming nobody by link) instead
// should Telegram refuse a mention in text.
func (s sender) postOnceOr(ctx context.Context, key string, chatID int64, thread int, text, plain string, markup models.ReplyMarkup) (chat.Sent, error) {
	once := s.Sender
	return once.PostOnce(ctx, key, func(ctx context.Context) (string, error) {
		var id int
		err := withoutMentions(text, plain, func(text string) (err error) {
			id, err = s.Client.Send(ctx, chatID, thread, text, markup)
			return err
		})
		return strconv.Itoa(id), err
	})
}

// sender is the handler's post-once, for command answers.
func (h *Handler) sender() sender {
	return sender(chat.NewPoster(chat.PlatformTelegram, h.cfg.Outbox, h.cfg.Client, h.cfg.Clock, h.log, ErrMaybePosted))
}
