package telegram

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Notifier posts in Telegram what the engine has to say: finished runs'
// answers (split at 4,096 characters, MarkdownV2-escaped), approval cards
// with Approve / Deny buttons (chat.ApprovalRenderer), edited to the outcome
// on every decision, and routine results (routine.ChatDeliverer). Cards name
// Telegram users as their chat shows them (Client.Names), else by a mention.
// Every message goes through the outbox, once.
type Notifier struct{ sender }

// NewNotifier checks cfg and returns the notifier.
func NewNotifier(cfg chat.NotifierConfig[*Client]) (*Notifier, error) {
	p, err := cfg.Poster(chat.PlatformTelegram, ErrMaybePosted)
	if err != nil {
		return nil, err
	}
	return &Notifier{sender(p)}, nil
}

var _ chat.Platform = (*Notifier)(nil)

// Reply implements chat.Platform: the answer, one message per part. When
// it showed live, its message becomes the first part (an edit, made again
// on a retry), the rest is posted below; files the run's tools returned
// follow (sendPhoto, sendDocument), each once.
func (n *Notifier) Reply(ctx context.Context, a chat.Answer) error {
	text := a.Text
	if text == "_(no answer)_" { // Markdown for the others, shown as is here
		text = "(no answer)"
	}
	key := "reply:" + a.Run.ID
	chatID, err := ChatID(a.Binding.Channel)
	if err != nil {
		return err
	}
	if a.Live == "" {
		err = n.DeliverResult(ctx, a.Binding, key, text)
	} else {
		live, _ := strconv.Atoi(a.Live)
		parts := Split(text, MaxMessageLen)
		err = n.Sender.Finalize(ctx, "telegram:"+key+":live", a.Live, func(ctx context.Context) error {
			err := n.Client.Edit(ctx, chatID, live, Markdown(parts[0]), nil)
			if gone(err) {
				n.Logger.Warn("telegram live reply was deleted; posting the answer anew", "run", a.Run.ID, "err", err)
				return fmt.Errorf("%w: %w", chat.ErrGone, err)
			}
			return err
		}, func(ctx context.Context) (string, error) {
			id, err := n.Client.Send(ctx, chatID, threadID(a.Binding.Thread), Markdown(parts[0]), nil)
			return strconv.Itoa(id), err
		})
		if err != nil {
			return err
		}
		err = n.DeliverResult(ctx, a.Binding, key+":rest", strings.Join(parts[1:], "\n"))
	}
	if err != nil {
		return err
	}
	return n.Sender.Upload(ctx, "telegram:"+key, a.Files, chat.Uploads{File: func(ctx context.Context, f core.File) (string, error) {
		id, err := n.Client.SendFile(ctx, chatID, threadID(a.Binding.Thread), f.Name, f.MIME, f.Data, "")
		return strconv.Itoa(id), err
	}})
}

// gone reports whether an edit failed because its message was deleted or
// can no longer be edited.
// (Edit calls through go-telegram/bot, whose errors carry the description.)
func gone(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "message to edit not found") || strings.Contains(err.Error(), "message can't be edited"))
}

// DeliverResult implements routine.ChatDeliverer: text (Markdown) is posted
// in b's chat (and forum topic) as MarkdownV2, split at Telegram's limit,
// each part once.
func (n *Notifier) DeliverResult(ctx context.Context, b core.Binding, key, text string) error {
	id, err := ChatID(b.Channel)
	if err != nil {
		return err
	}
	for i, part := range Split(text, MaxMessageLen) {
		k := "telegram:" + key + ":" + strconv.Itoa(i)
		if _, err := n.postOnce(ctx, k, id, threadID(b.Thread), Markdown(part), nil); err != nil {
			return err
		}
	}
	return nil
}

// PostCard implements chat.ApprovalRenderer: a card with Approve / Deny
// buttons in b's chat (and topic).
func (n *Notifier) PostCard(ctx context.Context, key string, b core.Binding, a core.Approval, r core.Run) (chat.Sent, error) {
	chatID, err := ChatID(b.Channel)
	if err != nil {
		return chat.Sent{}, err
	}
	text, plain, kb := n.card(ctx, chatID, a, r)
	return n.postOnceOr(ctx, key, chatID, threadID(b.Thread), text, plain, kb)
}

// EditCard implements chat.ApprovalRenderer: a decided approval's card
// shows the outcome, without buttons.
func (n *Notifier) EditCard(ctx context.Context, ref string, b core.Binding, a core.Approval, r core.Run) error {
	chatID, err := ChatID(b.Channel)
	if err != nil {
		return err
	}
	msgID, _ := strconv.Atoi(ref)
	text, plain, kb := n.card(ctx, chatID, a, r)
	return withoutMentions(text, plain, func(text string) error {
		return n.Client.Edit(ctx, chatID, msgID, text, kb)
	})
}

// card renders approval a's card for chat, naming its approvers and
// decider as the chat shows them: its text (MarkdownV2), the text again
// naming nobody by link (should Telegram refuse a mention), and its
// keyboard.
func (n *Notifier) card(ctx context.Context, chatID int64, a core.Approval, r core.Run) (text, plain string, kb models.ReplyMarkup) {
	ids := a.Policy.Approvers
	byName := a.DecidedByName != "" // else decided_by, an id, is shown
	who := ids
	if !byName && a.DecidedBy != "" {
		who = append(slices.Clip(ids), a.DecidedBy)
	}
	p := lookUp(ctx, n.Client, chatID, who...)
	c := chat.Card(a, r, p.plainList)
	text = p.cardText(c, ids, byName)
	p.noMentions = true
	return text, p.cardText(c, ids, byName), Keyboard(c)
}

// argsRoom is the room of a card's arguments: 3,000 characters, which
// leaves the rest of Telegram's 4,096 to the card's other lines. A click on
// Approve is checked against it too (chat.Decide).
var argsRoom = chat.ArgsRoom{Max: 3000, Len: utf8.RuneCountInString, Mark: "…"}

// Keyboard is the card's inline keyboard: Approve / Deny while pending
// (only Deny when its arguments do not fit argsRoom), none after. Its
// callback_data stays within 64 bytes.
func Keyboard(c chat.ApprovalCard) models.ReplyMarkup {
	if !c.Pending() {
		return inlineKeyboard{InlineKeyboard: [][]callbackButton{}}
	}
	var row []callbackButton
	if argsRoom.Fits(c.Arguments) {
		row = append(row, callbackButton{Text: "✅ Approve", CallbackData: callbackApprove + c.ApprovalID})
	}
	row = append(row, callbackButton{Text: "❌ Deny", CallbackData: callbackDeny + c.ApprovalID})
	return inlineKeyboard{InlineKeyboard: [][]callbackButton{row}}
}

// inlineKeyboard is an inline_keyboard reply_markup of callback buttons.
// (go-telegram/bot's models.InlineKeyboardButton always sends
// "copy_text":{"text":""}, which Telegram refuses: BUTTON_COPY_TEXT_INVALID.)
type inlineKeyboard struct {
	InlineKeyboard [][]callbackButton `json:"inline_keyboard"`
}

type callbackButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// cardText is c's text, MarkdownV2, naming people as p does. approvers are
// the policy's approver ids c.Approvers lists (chat.Card with p.plainList);
// byName says c.DecidedBy is the decider's name, not their id.
func (p people) cardText(c chat.ApprovalCard, approvers []string, byName bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s* wants to run `%s`", Escape(c.Agent), escapeCode(c.Tool))
	if c.Server != "" {
		fmt.Fprintf(&b, " from MCP server `%s`", escapeCode(c.Server))
	}
	b.WriteString("\n")
	shown := argsRoom.Fit(c.Arguments)
	fmt.Fprintf(&b, "```json\n%s\n```\n", escapeCode(shown.Text))
	switch c.Status {
	case "", string(core.ApprovalPending):
		if shown.Cut {
			fmt.Fprintf(&b, "%s\n", Escape(chat.CutNote(c.ApprovalID, shown)))
		}
		who := Escape(c.Approvers)
		if rest, ok := strings.CutPrefix(c.Approvers, p.plainList(approvers)); ok && len(approvers) > 0 {
			who = p.list(approvers, p.markdown) + Escape(rest) // rest: " (not the requester)"
		}
		if c.Approvers == "" {
			who = Escape("anyone in this chat")
		}
		fmt.Fprintf(&b, "Who may decide: %s\nExpires %s", who, Escape(c.ExpiresAt.UTC().Format("Jan 2 15:04 UTC")))
	case string(core.ApprovalExpired):
		b.WriteString("⌛ *Expired*: nobody decided in time")
	case string(core.ApprovalCancelled):
		b.WriteString("🚫 *Cancelled*")
	default:
		mark := "✅"
		if c.Status == string(core.ApprovalDenied) {
			mark = "❌"
		}
		fmt.Fprintf(&b, "%s *%s* by %s", mark, Escape(strings.ToUpper(c.Status[:1])+c.Status[1:]), p.decider(c.DecidedBy, byName))
		if c.Reason != "" {
			fmt.Fprintf(&b, ": %s", Escape(c.Reason))
		}
	}
	return b.String()
}

// decider shows who decided, MarkdownV2: by (chat.DeciderShown) is their
// name when byName, else their id (a Telegram user's is named as p does).
func (p people) decider(by string, byName bool) string {
	switch _, isUser := telegramUser(by); {
	case by == "":
		return "someone"
	case isUser && !byName:
		return p.markdown(by)
	}
	return Escape(by)
}

// escapeCode escapes text inside a MarkdownV2 code entity: only ` and \.
func escapeCode(s string) string {
	return strings.NewReplacer("\\", "\\\\", "`", "\\`").Replace(s)
}
