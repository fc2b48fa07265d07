package config_test

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/config"
)

func TestTelegram(t *testing.T) {
	c, err := config.Parse([]byte(`
agents: {a: {model: {provider: demo}}, b: {model: {provider: demo}}}
interfaces: {telegram: {default_agent: a, chats: {"-1001234567890": b}}}`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	tg := c.Interfaces.Telegram
	if tg.Mode() != config.TelegramMentionOrReply || tg.Chats["-1001234567890"] != "b" {
		t.Fatalf("telegram = %+v", tg)
	}
}

func TestTelegramErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"no default agent", `
agents: {a: {model: {provider: demo}}}
interfaces: {telegram: {}}`, "interfaces.telegram.default_agent: required"},
		{"unknown default agent", `
agents: {a: {model: {provider: demo}}}
interfaces: {telegram: {default_agent: z}}`, `interfaces.telegram.default_agent: no agent "z"`},
		{"bad group mode", `
agents: {a: {model: {provider: demo}}}
interfaces: {telegram: {default_agent: a, group_mode: mentions}}`, "interfaces.telegram.group_mode: must be mention_or_reply or all"},
		{"chat name instead of id", `
agents: {a: {model: {provider: demo}}}
interfaces: {telegram: {default_agent: a, chats: {"@ops": a}}}`, "interfaces.telegram.chats.@ops: must be a numeric chat id"},
		{"chat to unknown agent", `
agents: {a: {model: {provider: demo}}}
interfaces: {telegram: {default_agent: a, chats: {"42": z}}}`, `interfaces.telegram.chats.42: no agent "z"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
