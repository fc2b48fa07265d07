package config

import (
	"fmt"
	"regexp"
)

// Discord configures the Discord interface. DISCORD_BOT_TOKEN is required;
// DISCORD_PUBLIC_KEY turns on interactions over HTTP at
// POST /discord/interactions (else they come over the Gateway);
// DISCORD_APPLICATION_ID registers the /agentgate command; DISCORD_API_URL
// points the REST client elsewhere.
type Discord struct {
	// DefaultAgent answers in channels not listed in Channels. Required.
	DefaultAgent string `yaml:"default_agent"`
	// Channels routes a channel id (for a thread, its parent channel) to an
	// agent.
	Channels map[string]string `yaml:"channels"`
	// ReplyInThreadWithoutMention: later messages in a thread the bot
	// answers continue the conversation without a new mention. Default true.
	ReplyInThreadWithoutMention *bool `yaml:"reply_in_thread_without_mention"`
	// IgnoreBots ignores messages posted by other bots (the bot's own are
	// always ignored). Default true.
	IgnoreBots *bool `yaml:"ignore_bots"`
}

// ThreadFollowUps reports ReplyInThreadWithoutMention with its default.
func (d *Discord) ThreadFollowUps() bool {
	return d.ReplyInThreadWithoutMention == nil || *d.ReplyInThreadWithoutMention
}

// IgnoresBots reports IgnoreBots with its default.
func (d *Discord) IgnoresBots() bool { return d.IgnoreBots == nil || *d.IgnoreBots }

var discordSnowflakePattern = regexp.MustCompile(`^[0-9]{17,20}$`)

// validateDiscord returns the problems of interfaces.discord.
func (c *Config) validateDiscord() []string {
	d := c.Interfaces.Discord
	if d == nil {
		return nil
	}
	var p []string
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	switch _, ok := c.Agents[d.DefaultAgent]; {
	case d.DefaultAgent == "":
		add("interfaces.discord.default_agent", "required: the agent that answers in Discord")
	case !ok:
		add("interfaces.discord.default_agent", "no agent %q in agents", d.DefaultAgent)
	}
	for _, ch := range sortedKeys(d.Channels) {
		path := "interfaces.discord.channels." + ch
		if !discordSnowflakePattern.MatchString(ch) {
			add(path, "must be a Discord channel id, 17 to 20 digits (Developer Mode on, then right-click the channel → Copy Channel ID)")
		}
		if _, ok := c.Agents[d.Channels[ch]]; !ok {
			add(path, "no agent %q in agents", d.Channels[ch])
		}
	}
	return p
}
