package discord

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// CommandName is the application command agentgate registers.
const CommandName = "agentgate"

// Commands are the application commands registered on start:
// /agentgate run <routine> [input], routines, approvals, help.
func Commands() []*discordgo.ApplicationCommand {
	str := discordgo.ApplicationCommandOptionString
	sub := discordgo.ApplicationCommandOptionSubCommand
	return []*discordgo.ApplicationCommand{{
		Name: CommandName, Description: "Talk to agentgate",
		Options: []*discordgo.ApplicationCommandOption{
			{Type: sub, Name: "run", Description: "Run a routine now; its output is posted here", Options: []*discordgo.ApplicationCommandOption{
				{Type: str, Name: "routine", Description: "The routine's id", Required: true},
				{Type: str, Name: "input", Description: "Extra input for this run"},
			}},
			{Type: sub, Name: "routines", Description: "List the routines"},
			{Type: sub, Name: "approvals", Description: "List the requests waiting for your decision"},
			{Type: sub, Name: "help", Description: "How to use agentgate"},
		},
	}}
}

const commandHelp = "**/agentgate** talks to agentgate:\n" +
	"- `/agentgate run routine:<routine> [input:<text>]` runs a routine now; its output is posted here\n" +
	"- `/agentgate routines` lists the routines\n" +
	"- `/agentgate approvals` lists the requests waiting for your decision\n" +
	"- `/agentgate help` shows this\n" +
	"Mention the bot in a channel (it answers in a thread) or write to it directly to talk to an agent."

// command answers an application command within Discord's 3 seconds with a
// deferred response; the answer follows (after).
func (h *Handler) command(i *discordgo.Interaction) (*discordgo.InteractionResponse, func(context.Context), error) {
	data := i.ApplicationCommandData()
	if data.Name != CommandName {
		return ephemeral("This app answers `/%s`, not `/%s`.", CommandName, data.Name), nil, nil
	}
	sub, opts := "help", map[string]string{}
	if len(data.Options) > 0 {
		sub = data.Options[0].Name
		for _, o := range data.Options[0].Options {
			if s, ok := o.Value.(string); ok {
				opts[o.Name] = strings.TrimSpace(s)
			}
		}
	}
	user, roles := actor(i)
	deferred := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}}
	return deferred, func(ctx context.Context) {
		text, err := h.commandText(ctx, i, sub, opts, user, roles)
		if err != nil {
			h.log.Error("discord command", "sub", sub, "err", err)
			text = "Something went wrong; try again."
		}
		h.followup(ctx, i, text)
	}, nil
}

func (h *Handler) commandText(ctx context.Context, i *discordgo.Interaction, sub string, opts map[string]string, user string, roles []string) (string, error) {
	p := chat.Asker(chat.PlatformDiscord, i.GuildID, i.ChannelID, user)
	p.Groups = roles
	ic := h.cfg.Interact
	c := chat.Commands{Routines: ic.Routines, Decider: ic.Approvals, Store: ic.Store}
	switch sub {
	case "help":
		return commandHelp, nil
	case "routines":
		return c.ListRoutines(ctx, p, dialect)
	case "run":
		return c.RunRoutine(ctx, p, core.Binding{Platform: chat.PlatformDiscord, Workspace: i.GuildID, Channel: i.ChannelID},
			opts["routine"], opts["input"], "run:interaction:"+i.ID, dialect)
	case "approvals":
		return c.ListApprovals(ctx, p, core.Binding{Platform: chat.PlatformDiscord, Channel: i.ChannelID}, dialect)
	}
	return "Unknown command `" + escape(sub) + "`.\n" + commandHelp, nil
}

// dialect writes command answers in Discord's Markdown; times show in each
// reader's zone.
var dialect = chat.Dialect{
	Text: escape, Bold: func(s string) string { return "**" + s + "**" },
	Code:   code,
	Date:   func(t time.Time) string { return fmt.Sprintf("<t:%d:f>", t.Unix()) },
	Bullet: "- ",
	Usage: func(sub, _ string) string {
		if sub == "run" {
			return "/agentgate run routine:<routine>" // the input option is shown by Discord
		}
		return "/agentgate " + sub
	},
}
