package config_test

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/config"
)

func TestDiscord(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
agents: {a: {model: {provider: demo}}, b: {model: {provider: demo}}}
interfaces: {discord: {default_agent: a, channels: {"1100000000000000001": b}, ignore_bots: false}}`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Interfaces.Discord
	if d.DefaultAgent != "a" || d.Channels["1100000000000000001"] != "b" || !d.ThreadFollowUps() || d.IgnoresBots() {
		t.Fatalf("discord = %+v", d)
	}
}

func TestDiscordErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, yaml, want string }{
		{"no default agent", `
agents: {a: {model: {provider: demo}}}
interfaces: {discord: {}}`, "interfaces.discord.default_agent: required"},
		{"unknown default agent", `
agents: {a: {model: {provider: demo}}}
interfaces: {discord: {default_agent: z}}`, `interfaces.discord.default_agent: no agent "z"`},
		{"channel name instead of id", `
agents: {a: {model: {provider: demo}}}
interfaces: {discord: {default_agent: a, channels: {"#ops": a}}}`, "interfaces.discord.channels.#ops: must be a Discord channel id"},
		{"channel to unknown agent", `
agents: {a: {model: {provider: demo}}}
interfaces: {discord: {default_agent: a, channels: {"1100000000000000001": z}}}`, `interfaces.discord.channels.1100000000000000001: no agent "z"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tc.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
