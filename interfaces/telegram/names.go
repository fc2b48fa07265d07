package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// How long Names keeps what Telegram said of a user in a chat: their name,
// or that it has none for them (not in the chat, or the lookup failed), and
// how many answers it keeps at most; how long it keeps the name an update
// showed a user with (saw), and how many of those.
const (
	nameTTL        = time.Hour
	noNameTTL      = 5 * time.Minute
	maxCachedNames = 10_000
	seenNameTTL    = 24 * time.Hour
	maxSeenNames   = 10_000
)

// Names returns how chat shows each of users: "@username" when they have
// one, else their first and last name. A user seen on an update (a message
// or a click that reached the bot) in the last day is named as that update
// showed them, without asking Telegram; the others are looked up
// (getChatMember). A user Telegram does not name there (never in the chat,
// or the lookup failed or was not done within NameTimeout for all of
// users) is left out. Answers are cached per chat and user, an hour for a
// name and five minutes for none, so a message costs at most one lookup
// per user an hour.
func (c *Client) Names(ctx context.Context, chat int64, users []int64) map[int64]string {
	out := make(map[int64]string, len(users))
	lookups, cancel := context.WithTimeout(ctx, c.cfg.NameTimeout)
	defer cancel()
	for _, user := range users {
		if name, seen := c.seen.Get(nameKey{user: user}, c.cfg.Clock.Now()); seen {
			out[user] = name
			continue
		}
		if chat == 0 {
			continue // no chat to ask about
		}
		key := nameKey{chat: chat, user: user}
		if name, cached := c.names.Get(key, c.cfg.Clock.Now()); cached {
			if name != "" {
				out[user] = name
			}
			continue
		}
		if lookups.Err() != nil {
			continue // out of time: not looked up, nothing to cache
		}
		u, err := c.ChatMember(lookups, chat, user)
		switch {
		case err == nil:
			out[user] = userName(u)
			c.names.Put(key, out[user], c.cfg.Clock.Now(), nameTTL)
		case ctx.Err() != nil: // the caller gave up, Telegram did not answer
		default:
			if errors.Is(err, bot.ErrorBadRequest) {
				c.log.Debug("telegram: no name for a user in a chat", "chat", chat, "user", user, "err", err)
			} else {
				c.log.Warn("telegram: name lookup failed; the user shows as a mention", "chat", chat, "user", user, "err", err)
			}
			c.names.Put(key, "", c.cfg.Clock.Now(), noNameTTL)
		}
	}
	return out
}

// saw records how an update (its from) shows user u, for Names.
func (c *Client) saw(u *models.User) {
	if u == nil || u.ID <= 0 || u.IsBot {
		return
	}
	if name := userName(*u); name != "" {
		c.seen.Put(nameKey{user: u.ID}, name, c.cfg.Clock.Now(), seenNameTTL)
	}
}

// nameKey names a user in a chat; chat 0 in the names seen on updates.
type nameKey struct{ chat, user int64 }

// people is how a message names the people it is about, in one chat:
// Telegram users by the name the chat shows (Client.Names), else as a
// mention of them, which Telegram's apps show as a link to their profile.
type people struct {
	names      map[int64]string // Telegram user id → "@username" or name
	noMentions bool             // Telegram refused a mention: name nobody by link
}

// lookUp names the Telegram users among ids (approver or principal ids) in
// chat.
func lookUp(ctx context.Context, c *Client, chat int64, ids ...string) people {
	var users []int64
	for _, id := range ids {
		if u, ok := telegramUser(id); ok {
			users = append(users, u)
		}
	}
	if len(users) == 0 {
		return people{}
	}
	return people{names: c.Names(ctx, chat, users)}
}

// telegramUser is the Telegram user id or principal (telegram:<id>).
func telegramUser(id string) (int64, bool) {
	u, err := strconv.ParseInt(strings.TrimPrefix(id, chat.PlatformTelegram+":"), 10, 64)
	return u, err == nil && u > 0
}

// someone is a Telegram user in plain text when their chat does not name
// them; mentionText is the text of a mention of them.
const (
	someone     = "a Telegram user"
	mentionText = "Telegram user"
)

// plain shows id as plain text: a Telegram user (id or telegram:<id>) by
// name, else as "a Telegram user"; "requester" as "the requester"; anything
// else (key:<name>, role:<role>, a person's name) as is.
func (p people) plain(id string) string {
	if id == approval.Requester {
		return "the requester"
	}
	if u, ok := telegramUser(id); ok {
		if name, ok := p.names[u]; ok {
			return name
		}
		return someone
	}
	return id
}

// markdown shows id in MarkdownV2 as plain does, except that a Telegram
// user the chat does not name is a mention: [Telegram user](tg://user?id=…).
func (p people) markdown(id string) string {
	if u, ok := telegramUser(id); ok && !p.noMentions {
		if _, named := p.names[u]; !named {
			return "[" + mentionText + "](tg://user?id=" + strconv.FormatInt(u, 10) + ")"
		}
	}
	return Escape(p.plain(id))
}

// list shows ids, each as show does, separated by commas.
func (p people) list(ids []string, show func(id string) string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = show(id)
	}
	return strings.Join(out, ", ")
}

// plainList is list in plain text: chat.Card's and chat.WhoMay's approvers.
func (p people) plainList(ids []string) string { return p.list(ids, p.plain) }

// mentionRefused reports whether Telegram refused a text for a mention of
// a user it will not let the bot mention (ENTITY_MENTION_USER_INVALID).
func mentionRefused(err error) bool {
	return errors.Is(err, bot.ErrorBadRequest) && strings.Contains(strings.ToUpper(err.Error()), "MENTION")
}

// withoutMentions calls send with text, and with plain (the same text
// naming nobody by link) should Telegram refuse a mention in text.
func withoutMentions(text, plain string, send func(text string) error) error {
	err := send(text)
	if err != nil && plain != text && mentionRefused(err) {
		return send(plain)
	}
	return err
}
