package telegram_test

import (
	"testing"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/interfaces/telegram"
)

// textUpdate is a message of text from user in chat (private when chat
// is user), a bot_command entity on its first word when it starts with /.
func textUpdate(user models.User, chat int64, text string) models.Update {
	m := &models.Message{ID: 41, From: &user, Chat: models.Chat{ID: chat, Type: models.ChatTypeSupergroup}, Date: 1764686400, Text: text}
	if chat == user.ID {
		m.Chat.Type = models.ChatTypePrivate
	}
	if text != "" && text[0] == '/' {
		n := len(text)
		for i, r := range text {
			if r == ' ' {
				n = i
				break
			}
		}
		m.Entities = []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 0, Length: n}}
	}
	return models.Update{ID: 815000500, Message: m}
}

// A command addressed to another bot (/help@OtherBot) is for that bot: in
// a private chat or a group, whatever the group mode, it is neither a
// command nor a message for the agent. Addressed to this bot (in any case)
// or to nobody, it is a command.
func TestCommandForAnotherBot(t *testing.T) {
	t.Parallel()
	ana := models.User{ID: anaID, FirstName: "Ana", Username: "ana_ops"}
	tests := []struct {
		name, mode, text string
		chat             int64
		want             telegram.Kind
		command          string
	}{
		{"private, another bot", "", "/help@OtherBot", anaID, telegram.KindIgnored, ""},
		{"private, another bot with text", "", "/run@OtherBot daily-report", anaID, telegram.KindIgnored, ""},
		{"group, another bot", telegram.GroupAll, "/help@OtherBot", groupID, telegram.KindIgnored, ""},
		{"group mentions only, another bot", "", "/help@OtherBot", groupID, telegram.KindIgnored, ""},
		{"private, this bot", "", "/help@agentgate_bot", anaID, telegram.KindCommand, "help"},
		{"group, this bot in capitals", "", "/help@AgentGate_Bot", groupID, telegram.KindCommand, "help"},
		{"private, unaddressed", "", "/help", anaID, telegram.KindCommand, "help"},
		{"group, unaddressed", telegram.GroupAll, "/routines", groupID, telegram.KindCommand, "routines"},
		{"private, a message", "", "help@OtherBot", anaID, telegram.KindMessage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := telegram.Parser{BotID: 7000000001, BotUsername: "agentgate_bot", GroupMode: tt.mode}
			req := p.Parse(textUpdate(ana, tt.chat, tt.text))
			if req.Kind != tt.want {
				t.Fatalf("%q in %d parsed as kind %d (%+v), want %d", tt.text, tt.chat, req.Kind, req.Message, tt.want)
			}
			if tt.want == telegram.KindCommand && req.Command.Name != tt.command {
				t.Fatalf("%q: command %q, want %q", tt.text, req.Command.Name, tt.command)
			}
		})
	}
}

// A message, a command and a click name their sender as Telegram shows
// them: @username, else first and last name with the id (anyone may take
// any name), never by id alone.
func TestParseNamesTheSender(t *testing.T) {
	t.Parallel()
	p := telegram.Parser{BotID: 7000000001, BotUsername: "agentgate_bot"}
	for _, tt := range []struct {
		name string
		user models.User
		want string
	}{
		{"username", models.User{ID: anaID, FirstName: "Ana", Username: "ana_ops"}, "@ana_ops"},
		{"first and last name", models.User{ID: cleoID, FirstName: "Cleo", LastName: "Park"}, "Cleo Park (id 5550004)"},
		{"first name", models.User{ID: daveID, FirstName: "Dave"}, "Dave (id 5550005)"},
		{"a name like a username", models.User{ID: daveID, FirstName: "@ana_ops"}, "@ana_ops (id 5550005)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := p.Parse(textUpdate(tt.user, tt.user.ID, "hello")).Message.UserName; got != tt.want {
				t.Errorf("message: UserName = %q, want %q", got, tt.want)
			}
			if got := p.Parse(textUpdate(tt.user, groupID, "/approvals")).Command.UserName; got != tt.want {
				t.Errorf("command: UserName = %q, want %q", got, tt.want)
			}
			click := models.Update{ID: 815000501, CallbackQuery: &models.CallbackQuery{ID: "q", From: tt.user, Data: "a:apr_1"}}
			if got := p.Parse(click).Action.UserName; got != tt.want {
				t.Errorf("click: UserName = %q, want %q", got, tt.want)
			}
		})
	}
}
