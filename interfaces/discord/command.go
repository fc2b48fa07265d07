package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	approval "github.com/agentgate/agentgate/approvals"
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
	switch sub {
	case "help":
		return commandHelp, nil
	case "routines":
		return h.listRoutines(ctx, i, user, roles)
	case "run":
		return h.runRoutine(ctx, i, opts["routine"], opts["input"], user, roles)
	case "approvals":
		return h.myApprovals(ctx, i, user, roles)
	}
	return "Unknown command `" + escape(sub) + "`.\n" + commandHelp, nil
}

// listRoutines lists the routines the asker may run here.
func (h *Handler) listRoutines(ctx context.Context, i *discordgo.Interaction, user string, roles []string) (string, error) {
	rr := h.cfg.Interact.Routines
	if rr == nil {
		return "Routines are not available on this gateway.", nil
	}
	page, err := rr.List(ctx, core.RoutineFilter{ListOptions: core.ListOptions{Limit: 50}})
	if err != nil {
		return "", err
	}
	if len(page.Items) == 0 {
		return "No routines are defined. Add them under `routines:` in the config file.", nil
	}
	p := chat.Asker(chat.PlatformDiscord, i.GuildID, i.ChannelID, user)
	p.Groups = roles
	items, err := chat.Callable(ctx, h.cfg.Interact.Approvals, p, page.Items)
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return "No routine here lets you run it (their `callers:` leave you out).", nil
	}
	var b strings.Builder
	b.WriteString("**Routines you may run**\n")
	for _, r := range items {
		state := "on"
		if !r.Enabled {
			state = "off"
		}
		fmt.Fprintf(&b, "- `%s` (%s), agent %s, `%s`", r.ID, state, escape(r.AgentID), r.Schedule)
		if r.Enabled && r.NextFireAt != nil {
			fmt.Fprintf(&b, ", next <t:%d:f>", r.NextFireAt.Unix())
		}
		b.WriteString("\n")
	}
	if page.NextCursor != "" {
		b.WriteString("…and more; `agentgate routines list` shows all.\n")
	}
	b.WriteString("Run one with `/agentgate run`.")
	return b.String(), nil
}

func (h *Handler) runRoutine(ctx context.Context, i *discordgo.Interaction, id, extra, user string, roles []string) (string, error) {
	rr, d := h.cfg.Interact.Routines, h.cfg.Interact.Approvals
	if rr == nil || d == nil {
		return "Routines are not available on this gateway.", nil
	}
	p := chat.Asker(chat.PlatformDiscord, i.GuildID, i.ChannelID, user)
	p.Groups = roles
	run, err := d.Trigger(ctx, rr, p, id, extra, core.Binding{Platform: chat.PlatformDiscord, Workspace: i.GuildID, Channel: i.ChannelID}, "run:interaction:"+i.ID)
	if errors.Is(err, core.ErrNotFound) {
		return fmt.Sprintf("There is no routine `%s`. `/agentgate routines` lists them.", escape(id)), nil
	}
	if nc, ok := errors.AsType[*approval.NotCallerError](err); ok {
		return fmt.Sprintf("You may not run routine `%s`: %s.", escape(id), nc.Why), nil
	}
	if err != nil {
		return "", err
	}
	h.log.Info("discord command started routine", "routine", id, "run", run.ID, "user", user)
	return fmt.Sprintf("Started routine `%s` (run `%s`). Its output will be posted in this channel.", id, run.ID), nil
}

// myApprovals lists the pending approvals of this channel the caller may decide.
func (h *Handler) myApprovals(ctx context.Context, i *discordgo.Interaction, user string, roles []string) (string, error) {
	ic := h.cfg.Interact
	if ic.Store == nil || ic.Approvals == nil {
		return "Approvals are not available on this gateway.", nil
	}
	p := chat.Asker(chat.PlatformDiscord, i.GuildID, i.ChannelID, user)
	p.Groups = roles
	items, err := chat.Decidable(ctx, ic.Store, ic.Approvals, core.Binding{Platform: chat.PlatformDiscord, Channel: i.ChannelID}, p)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	n := len(items)
	for _, a := range items {
		fmt.Fprintf(&b, "- run `%s` wants to run `%s` (approval `%s`, expires <t:%d:R>)\n", a.RunID, a.Tool, a.ID, a.ExpiresAt.Unix())
	}
	if n == 0 {
		return "Nothing is waiting for your decision.", nil
	}
	return fmt.Sprintf("**Waiting for your decision in this channel** (%d)\n%sDecide with the buttons on their cards.", n, b.String()), nil
}
