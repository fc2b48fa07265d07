package config

import (
	"fmt"
	"regexp"
)

// Telegram configures the Telegram interface. The bot token comes from
// TELEGRAM_BOT_TOKEN; with TELEGRAM_WEBHOOK_SECRET set, updates arrive at
// POST /telegram/webhook, else by long polling.
type Telegram struct {
	// DefaultAgent answers in chats not listed in Chats. Required.
	DefaultAgent string `yaml:"default_agent"`
	// Chats routes a chat id (a user id for a private chat, a negative id
	// like -1001234567890 for a group) to an agent.
	Chats map[string]string `yaml:"chats"`
	// GroupMode says when the bot answers in a group: "mention_or_reply"
	// (default: when @mentioned or replied to) or "all" (every message;
	// turn the bot's privacy mode off in BotFather).
	GroupMode string `yaml:"group_mode"`
}

// Group modes of Telegram.GroupMode.
const (
	TelegramMentionOrReply = "mention_or_reply"
	TelegramAll            = "all"
)

// Mode reports GroupMode with its default.
func (t *Telegram) Mode() string {
	if t.GroupMode == "" {
		return TelegramMentionOrReply
	}
	return t.GroupMode
}

var telegramChatPattern = regexp.MustCompile(`^-?[0-9]{1,20}$`)

// validateTelegram returns the problems of interfaces.telegram.
func (c *Config) validateTelegram() []string {
	t := c.Interfaces.Telegram
	if t == nil {
		return nil
	}
	var p []string
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	switch _, ok := c.Agents[t.DefaultAgent]; {
	case t.DefaultAgent == "":
		add("interfaces.telegram.default_agent", "required: the agent that answers in Telegram")
	case !ok:
		add("interfaces.telegram.default_agent", "no agent %q in agents", t.DefaultAgent)
	}
	if m := t.Mode(); m != TelegramMentionOrReply && m != TelegramAll {
		add("interfaces.telegram.group_mode", "must be mention_or_reply or all, got %q", t.GroupMode)
	}
	for _, ch := range sortedKeys(t.Chats) {
		path := "interfaces.telegram.chats." + ch
		if !telegramChatPattern.MatchString(ch) {
			add(path, "must be a numeric chat id like -1001234567890 (forward a message to @userinfobot, or read chat.id in the bot's updates)")
		}
		if _, ok := c.Agents[t.Chats[ch]]; !ok {
			add(path, "no agent %q in agents", t.Chats[ch])
		}
	}
	return p
}
