package config

import (
	"fmt"
	"regexp"
)

// Interfaces configures the chat platforms. Tokens and secrets come from the
// environment, never from this file.
type Interfaces struct {
	// Slack, when set, answers in Slack; it also needs SLACK_BOT_TOKEN and
	// SLACK_SIGNING_SECRET in the environment.
	Slack *Slack `yaml:"slack"`
	// Telegram, when set, answers in Telegram; it also needs
	// TELEGRAM_BOT_TOKEN in the environment (telegram.go).
	Telegram *Telegram `yaml:"telegram"`
	// Discord, when set, answers in Discord; it also needs
	// DISCORD_BOT_TOKEN in the environment (discord.go).
	Discord *Discord `yaml:"discord"`
}

// Slack configures the Slack interface.
type Slack struct {
	// DefaultAgent answers in channels not listed in Channels. Required.
	DefaultAgent string `yaml:"default_agent"`
	// Channels routes a channel id (C…, G…, D…) to an agent.
	Channels map[string]string `yaml:"channels"`
	// ReplyInThreadWithoutMention: later messages in a thread the bot
	// answers continue the conversation without a new mention. Default true.
	ReplyInThreadWithoutMention *bool `yaml:"reply_in_thread_without_mention"`
	// IgnoreBots ignores messages posted by other bots (the bot's own are
	// always ignored). Default true.
	IgnoreBots *bool `yaml:"ignore_bots"`
	// Command is the slash command's name without the slash, as created in
	// the Slack app. Default "agentgate".
	Command string `yaml:"command"`
}

// CommandName reports Command with its default.
func (s *Slack) CommandName() string {
	if s.Command == "" {
		return "agentgate"
	}
	return s.Command
}

// ThreadFollowUps reports ReplyInThreadWithoutMention with its default.
func (s *Slack) ThreadFollowUps() bool {
	return s.ReplyInThreadWithoutMention == nil || *s.ReplyInThreadWithoutMention
}

// IgnoresBots reports IgnoreBots with its default.
func (s *Slack) IgnoresBots() bool { return s.IgnoreBots == nil || *s.IgnoreBots }

// AgentFor returns the agent that answers in channel.
func (s *Slack) AgentFor(channel string) string {
	if a, ok := s.Channels[channel]; ok {
		return a
	}
	return s.DefaultAgent
}

var slackCommandPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

var slackChannelPattern = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)

// validateInterfaces returns the problems of the interfaces section.
func (c *Config) validateInterfaces() []string {
	s := c.Interfaces.Slack
	if s == nil {
		return nil
	}
	var p []string
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	switch _, ok := c.Agents[s.DefaultAgent]; {
	case s.DefaultAgent == "":
		add("interfaces.slack.default_agent", "required: the agent that answers in Slack")
	case !ok:
		add("interfaces.slack.default_agent", "no agent %q in agents", s.DefaultAgent)
	}
	if s.Command != "" && !slackCommandPattern.MatchString(s.Command) {
		add("interfaces.slack.command", "must be a slash command name without the slash, lower case letters, digits, - and _ (like agentgate), got %q", s.Command)
	}
	for _, ch := range sortedKeys(s.Channels) {
		path := "interfaces.slack.channels." + ch
		if !slackChannelPattern.MatchString(ch) {
			add(path, "must be a Slack channel id like C0123ABCD (open the channel's details to copy it)")
		}
		if _, ok := c.Agents[s.Channels[ch]]; !ok {
			add(path, "no agent %q in agents", s.Channels[ch])
		}
	}
	return p
}
