package telegram_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/telegram"
)

// Telegram's placeholder senders: the from of a message whose sender is
// not a person's own account.
const (
	groupAnonymousBot = 1087968824 // an anonymous group admin
	channelBot        = 136817688  // a member posting as a channel
	telegramService   = 777000     // a channel post forwarded to its discussion group
	newsChannelID     = -1002000000001
)

var (
	anonymousAdmin = map[string]any{"id": groupAnonymousBot, "is_bot": true, "first_name": "Group", "username": "GroupAnonymousBot"}
	asChannel      = map[string]any{"id": channelBot, "is_bot": true, "first_name": "Channel", "username": "Channel_Bot"}
	service        = map[string]any{"id": telegramService, "is_bot": false, "first_name": "Telegram"}
	bob            = map[string]any{"id": bobID, "is_bot": false, "first_name": "Bob", "username": "bob_dev"}
	theGroup       = map[string]any{"id": groupID, "title": "Ops", "type": "supergroup"}
	newsChannel    = map[string]any{"id": newsChannelID, "title": "Ops news", "type": "channel"}
)

// groupUpdate is a message in the group from from, on behalf of
// senderChat (nil: nobody else), its first word a bot_command when it
// starts with / and a mention of the bot when it is @agentgate_bot.
func groupUpdate(updateID int64, from, senderChat map[string]any, text string, extra map[string]any) []byte {
	first, _, _ := strings.Cut(text, " ")
	m := map[string]any{"message_id": 500 + updateID%1000, "date": 1764686400, "from": from, "chat": theGroup, "text": text}
	switch {
	case strings.HasPrefix(first, "/"):
		m["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(first)}}
	case first == "@agentgate_bot":
		m["entities"] = []map[string]any{{"type": "mention", "offset": 0, "length": len(first)}}
	}
	if senderChat != nil {
		m["sender_chat"] = senderChat
	}
	for k, v := range extra {
		m[k] = v
	}
	body, _ := json.Marshal(map[string]any{"update_id": updateID, "message": m})
	return body
}

// A message or command that Telegram sends from a placeholder account (an
// anonymous admin, a member posting as a channel, a channel post forwarded
// to its discussion group) is no person's: the requester of its run would
// be the placeholder, shared by everyone posting that way, whom a person's
// click never matches (exclude_requester). It starts no run and no
// routine; the bot says, once, that it takes requests only from people
// posting as themselves. A person's message still starts a run.
func TestPlaceholderSendersStartNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		from, senderChat map[string]any
		text             string
		extra            map[string]any
	}{
		{"anonymous admin", anonymousAdmin, theGroup, "@agentgate_bot deploy web", nil},
		{"posting as a channel", asChannel, newsChannel, "@agentgate_bot deploy web", nil},
		{"channel post in the discussion group", service, newsChannel, "@agentgate_bot deploy web",
			map[string]any{"is_automatic_forward": true}},
		{"anonymous admin's /run", anonymousAdmin, theGroup, "/run daily-report", nil},
		{"anonymous admin's /approvals", anonymousAdmin, theGroup, "/approvals", nil},
		{"a person's message on behalf of a chat", bob, newsChannel, "@agentgate_bot deploy web", nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "")
			body := groupUpdate(int64(815000600+i), tt.from, tt.senderChat, tt.text, tt.extra)
			for range 2 { // Telegram's retry: still one note
				if code := e.post(t, secret, body); code != http.StatusOK {
					t.Fatalf("got %d", code)
				}
			}
			waitFor(t, e.fake, "the note", func() bool { return len(messagesIn(e.fake, groupID)) > 0 })
			// A person's message after it: its answer is the group's first
			// run, in a session that saw nothing before.
			if code := e.post(t, secret, groupUpdate(815000699, bob, nil, "@agentgate_bot status of web?", nil)); code != http.StatusOK {
				t.Fatalf("got %d", code)
			}
			e.said(t, `ops saw 1: status of web?\.`)
			got := messagesIn(e.fake, groupID)
			if len(got) != 2 || !strings.Contains(got[0].Text, "only from people posting as themselves") {
				t.Fatalf("messages in the group = %+v, want the note once, then the answer to bob", got)
			}
			runs, err := e.db.ListRuns(t.Context(), core.RunFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs.Items) != 1 || runs.Items[0].StartedBy != principal(bobID) {
				t.Errorf("runs = %+v, want bob's only", runs.Items)
			}
			e.routines.mu.Lock()
			defer e.routines.mu.Unlock()
			if len(e.routines.triggered) != 0 {
				t.Errorf("triggered = %q, want nothing", e.routines.triggered)
			}
		})
	}
}

// The parser takes no message or command of a placeholder sender, or of
// one posting on behalf of a chat, as a person's: none names the
// placeholder as its user.
func TestParsePlaceholderSenders(t *testing.T) {
	t.Parallel()
	p := telegram.Parser{BotID: 7000000001, BotUsername: "agentgate_bot", GroupMode: telegram.GroupAll}
	for _, tt := range []struct {
		name       string
		from       int64
		senderChat *models.Chat
	}{
		{"anonymous admin", groupAnonymousBot, &models.Chat{ID: groupID, Type: models.ChatTypeSupergroup}},
		{"anonymous admin without sender_chat", groupAnonymousBot, nil},
		{"as a channel", channelBot, &models.Chat{ID: newsChannelID, Type: models.ChatTypeChannel}},
		{"as a channel without sender_chat", channelBot, nil},
		{"service account", telegramService, nil},
		{"a user on behalf of a channel", bobID, &models.Chat{ID: newsChannelID, Type: models.ChatTypeChannel}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, text := range []string{"deploy web", "@agentgate_bot deploy web", "/run daily-report", "/new"} {
				u := textUpdate(models.User{ID: tt.from, IsBot: tt.from != telegramService && tt.from != bobID, FirstName: "X"}, groupID, text)
				u.Message.SenderChat = tt.senderChat
				req := p.Parse(u)
				if req.Kind == telegram.KindMessage || req.Kind == telegram.KindCommand || req.Kind == telegram.KindReason ||
					req.Message != nil || req.Command != nil || req.Action != nil {
					t.Errorf("%q parsed as kind %d (message %+v, command %+v), want no person's request", text, req.Kind, req.Message, req.Command)
				}
			}
		})
	}
	// The same texts from bob, on his own: his.
	for _, text := range []string{"deploy web", "/run daily-report"} {
		req := p.Parse(textUpdate(models.User{ID: bobID, FirstName: "Bob"}, groupID, text))
		if req.Message == nil && req.Command == nil {
			t.Errorf("bob's %q parsed as %+v, want his message or command", text, req)
		}
	}
}

// FuzzMessageSender feeds messages from any sender, on behalf of a chat or
// not, to the parser: a message of a placeholder account or with a
// sender_chat is never a person's message, command or reason.
func FuzzMessageSender(f *testing.F) {
	for _, from := range []int64{groupAnonymousBot, channelBot, telegramService, bobID, 7000000001, 0, -1} {
		for _, text := range []string{"@agentgate_bot deploy web", "/run daily-report", "/run@agentgate_bot x", "hi", ""} {
			f.Add(from, from != bobID, text, int64(groupID), true)
		}
	}
	p := telegram.Parser{BotID: 7000000001, BotUsername: "agentgate_bot", GroupMode: telegram.GroupAll}
	f.Fuzz(func(t *testing.T, from int64, onBehalf bool, text string, chat int64, topic bool) {
		u := textUpdate(models.User{ID: from, FirstName: "X"}, chat, text)
		if onBehalf {
			u.Message.SenderChat = &models.Chat{ID: newsChannelID, Type: models.ChatTypeChannel}
		}
		if topic {
			u.Message.IsTopicMessage, u.Message.MessageThreadID = true, 77
		}
		req := p.Parse(u)
		placeholder := from == groupAnonymousBot || from == channelBot || from == telegramService
		if (placeholder || onBehalf) && (req.Message != nil || req.Command != nil || req.Action != nil) {
			t.Fatalf("from %d (on behalf of a chat: %t) %q parsed as %+v, want no person's request", from, onBehalf, text, req)
		}
		if req.Kind == telegram.KindAnonymous && (req.Chat != strconv.FormatInt(chat, 10) || topic && req.Thread != "77") {
			t.Fatalf("note for %q goes to chat %q, thread %q; want %d, 77", text, req.Chat, req.Thread, chat)
		}
	})
}
