package telegram

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Group modes: when the bot answers in a group.
const (
	// GroupMentionOrReply: when mentioned (@bot) or replied to. The default.
	GroupMentionOrReply = "mention_or_reply"
	// GroupAll: every message (the bot needs privacy mode off to see them).
	GroupAll = "all"
)

// Kind is what an update asks of the bot.
type Kind int

// Kinds of update.
const (
	KindIgnored  Kind = iota // nothing for the bot
	KindMessage              // a message for the agent
	KindCommand              // a /command
	KindCallback             // a click on an inline keyboard button
	// KindReason: a reply to a bot message that reads as its "why deny?"
	// prompt. Action is the deny it would confirm, with the reply as its
	// reason; the handler makes it only if the message replied to
	// (ReplyTo) is the prompt it posted for that approval, user and chat.
	// Otherwise it is Message (nil when empty), an ordinary message to the
	// bot.
	KindReason
	// KindAnonymous: a message or command for the bot that no person sent
	// as themselves (an anonymous admin, a member posting as a channel, a
	// channel post in its discussion group). Its sender is a placeholder
	// everyone posting that way shares, which a person's click never
	// matches (exclude_requester): it starts nothing, and the bot says so
	// in Chat (and Thread).
	KindAnonymous
)

// Telegram's placeholder accounts: the from of a message posted on behalf
// of a chat, shared by everyone who posts that way.
const (
	telegramServiceID   = 777000     // "Telegram": a channel post forwarded to its linked discussion group
	channelBotID        = 136817688  // @Channel_Bot: a member posting as a channel
	groupAnonymousBotID = 1087968824 // @GroupAnonymousBot: an anonymous group admin
)

// anonymousNote answers a KindAnonymous.
const anonymousNote = "I take requests only from people posting as themselves, not anonymously or as a channel: " +
	"post as yourself to ask me or to use a command."

// anonymous reports whether m is posted on behalf of a chat rather than
// by a person as themselves: from a placeholder account, or with a
// sender_chat.
func anonymous(m *models.Message) bool {
	switch m.From.ID {
	case telegramServiceID, channelBotID, groupAnonymousBotID:
		return true
	}
	return m.SenderChat != nil
}

// Request is an update, parsed: what the bot should do with it.
type Request struct {
	Kind Kind
	// Key dedupes the update in the inbox: "upd:{update_id}".
	Key     string
	Message *chat.Inbound
	Command *chat.Command
	Action  *chat.Action
	// CallbackID answers the callback query (KindCallback).
	CallbackID string
	// Chat is the chat of a KindAnonymous, where its note goes.
	Chat string
	// Thread is the forum topic of a command or a KindAnonymous, where its
	// answer goes.
	Thread string
	// ReplyTo is the id of the bot's message a KindReason replies to.
	ReplyTo string
}

// Parser turns updates into requests; it knows the bot, to tell mentions
// of it and replies to it.
type Parser struct {
	BotID       int64
	BotUsername string // without the @
	// GroupMode is GroupMentionOrReply (default) or GroupAll.
	GroupMode string
}

// Parse reads one update.
func (p Parser) Parse(u models.Update) Request {
	req := Request{Key: "upd:" + strconv.FormatInt(u.ID, 10)}
	switch {
	case u.Message != nil:
		p.message(&req, u.Message)
	case u.CallbackQuery != nil:
		p.callback(&req, u.CallbackQuery)
	}
	return req
}

func (p Parser) message(req *Request, m *models.Message) {
	files := messageFiles(m)
	if len(files) > 0 && m.Text == "" { // a photo or document: its caption is the text
		withCaption := *m
		withCaption.Text, withCaption.Entities = m.Caption, m.CaptionEntities
		m = &withCaption
	}
	if m.From == nil || m.Text == "" && len(files) == 0 || m.From.ID == p.BotID {
		return
	}
	private := m.Chat.Type == models.ChatTypePrivate
	thread := ""
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		thread = strconv.Itoa(m.MessageThreadID) // one session per forum topic
	}
	channel, user := strconv.FormatInt(m.Chat.ID, 10), strconv.FormatInt(m.From.ID, 10)
	name, args, ok, forOther := p.command(m)
	if forOther {
		return // "/help@OtherBot": for that bot, in any chat
	}
	nobody := anonymous(m)
	if ok && nobody {
		req.Kind, req.Chat, req.Thread = KindAnonymous, channel, thread
		return
	}
	if ok {
		req.Kind = KindCommand
		req.Command = &chat.Command{Platform: chat.PlatformTelegram, Channel: channel, UserID: user,
			UserName: userName(*m.From), Name: name, Text: args}
		req.Thread = thread
		return
	}
	text, mentioned := p.stripMention(m)
	replied := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == p.BotID
	if !private && p.GroupMode != GroupAll && !mentioned && !replied {
		return
	}
	if nobody {
		if strings.TrimSpace(text) != "" || len(files) > 0 {
			req.Kind, req.Chat, req.Thread = KindAnonymous, channel, thread
		}
		return
	}
	if strings.TrimSpace(text) != "" || len(files) > 0 {
		req.Kind = KindMessage
		req.Message = &chat.Inbound{
			Platform: chat.PlatformTelegram, Channel: channel, Thread: thread,
			MessageID: strconv.Itoa(m.ID), UserID: user, UserName: userName(*m.From), Text: strings.TrimSpace(text),
			Mentioned: mentioned || replied, FromBot: m.From.IsBot, DirectMessage: private,
			At: time.Unix(int64(m.Date), 0).UTC(), Files: files,
		}
	}
	if id, ok := reasonFor(m.ReplyToMessage); replied && ok {
		// Maybe the answer to the bot's "why deny?": the text only names
		// the approval; the handler checks that the message replied to is
		// the prompt it posted (the outbox), else this is the message.
		reason := strings.TrimSpace(text)
		if reason == noReason {
			reason = ""
		}
		req.Kind, req.ReplyTo = KindReason, strconv.Itoa(m.ReplyToMessage.ID)
		req.Action = &chat.Action{Platform: chat.PlatformTelegram, Channel: channel, Thread: thread, UserID: user,
			UserName: userName(*m.From), ActionID: chat.ActionDeny, ApprovalID: id, Confirmed: true, Reason: reason}
	}
}

// messageFiles are the photo (its largest size; Telegram sends photos as
// JPEG) and the document of m.
func messageFiles(m *models.Message) []chat.InFile {
	var out []chat.InFile
	if n := len(m.Photo); n > 0 {
		ph := m.Photo[n-1]
		out = append(out, chat.InFile{Ref: ph.FileID, Name: "photo.jpg", MIME: "image/jpeg", Size: int64(ph.FileSize)})
	}
	if d := m.Document; d != nil {
		out = append(out, chat.InFile{Ref: d.FileID, Name: d.FileName, MIME: d.MimeType, Size: d.FileSize})
	}
	return out
}

// command reads a bot_command at the start of m: "/run@bot daily" is
// ("run", "daily"). forOther reports a command addressed to another bot
// ("/help@OtherBot"): not one for this bot, nor a message to it.
func (p Parser) command(m *models.Message) (name, args string, ok, forOther bool) {
	if len(m.Entities) == 0 || m.Entities[0].Type != models.MessageEntityTypeBotCommand || m.Entities[0].Offset != 0 {
		return "", "", false, false
	}
	cmd := entityText(m.Text, m.Entities[0])
	if cmd == "" || !strings.HasPrefix(m.Text, cmd) {
		return "", "", false, false
	}
	name, at, addressed := strings.Cut(strings.TrimPrefix(cmd, "/"), "@")
	if addressed && !strings.EqualFold(at, p.BotUsername) {
		return "", "", false, true
	}
	return strings.ToLower(name), strings.TrimSpace(m.Text[len(cmd):]), name != "", false
}

// stripMention removes the bot's @mentions from m's text and reports
// whether there was one.
func (p Parser) stripMention(m *models.Message) (string, bool) {
	if p.BotUsername == "" {
		return m.Text, false
	}
	units := utf16.Encode([]rune(m.Text))
	var out []uint16
	last, found := 0, false
	for _, e := range m.Entities {
		if e.Type != models.MessageEntityTypeMention || e.Offset < last || e.Offset+e.Length > len(units) {
			continue
		}
		if !strings.EqualFold(string(utf16.Decode(units[e.Offset:e.Offset+e.Length])), "@"+p.BotUsername) {
			continue
		}
		out = append(out, units[last:e.Offset]...)
		last, found = e.Offset+e.Length, true
	}
	if !found {
		return m.Text, false
	}
	out = append(out, units[last:]...)
	return strings.Join(strings.Fields(string(utf16.Decode(out))), " "), true
}

func entityText(text string, e models.MessageEntity) string {
	units := utf16.Encode([]rune(text))
	if e.Offset < 0 || e.Offset+e.Length > len(units) {
		return ""
	}
	return string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
}

// Callback data of the approval buttons: "a:{approval id}" and
// "d:{approval id}", well within Telegram's 64 bytes.
const (
	callbackApprove = "a:"
	callbackDeny    = "d:"
)

func (p Parser) callback(req *Request, q *models.CallbackQuery) {
	var action string
	switch {
	case strings.HasPrefix(q.Data, callbackApprove):
		action = chat.ActionApprove
	case strings.HasPrefix(q.Data, callbackDeny):
		action = chat.ActionDeny
	default:
		return
	}
	req.Kind, req.CallbackID = KindCallback, q.ID
	req.Action = &chat.Action{Platform: chat.PlatformTelegram, UserID: strconv.FormatInt(q.From.ID, 10),
		UserName: userName(q.From), ActionID: action, ApprovalID: q.Data[2:]}
	if q.From.ID == 0 {
		req.Action.UserID = "" // no user: the click decides nothing
	}
	if m := q.Message.Message; m != nil {
		req.Action.Channel = strconv.FormatInt(m.Chat.ID, 10)
		req.Action.MessageRef = strconv.Itoa(m.ID)
		if m.IsTopicMessage {
			req.Action.Thread = strconv.Itoa(m.MessageThreadID)
		}
	}
}

// reasonPrompt asks the clicker of Deny for a reason, as the reply to the
// bot's message. It names the request first, before any name, for
// reasonFor to read back: a name cannot shadow it.
const (
	reasonPrompt = "Request %s: %s, why deny %s? Reply to this message with the reason, or with %s to deny without one."
	noReason     = "-"
)

// reasonFor is the approval id a bot message reading as a reason prompt
// names; ok is false for any other message. Anyone can make the bot say
// such a text (the agent repeats what it is told): the id only says which
// prompt to look for in the outbox.
func reasonFor(m *models.Message) (id string, ok bool) {
	if m == nil {
		return "", false
	}
	rest, found := strings.CutPrefix(m.Text, "Request ")
	if !found {
		return "", false
	}
	id, _, found = strings.Cut(rest, ":")
	if !found || !strings.HasPrefix(id, "apr_") || !core.ValidID(id) {
		return "", false
	}
	return id, true
}

// userName shows a Telegram user as their updates name them: @username
// (unique), else their first and last name with their id: anyone may
// name themselves "@cto" or after an approver, and a card's "Approved by"
// must not pass for someone else's; "" for a user without either.
func userName(u models.User) string {
	if u.Username != "" {
		return "@" + u.Username
	}
	if name := strings.TrimSpace(u.FirstName + " " + u.LastName); name != "" {
		return fmt.Sprintf("%s (id %d)", name, u.ID)
	}
	return ""
}
