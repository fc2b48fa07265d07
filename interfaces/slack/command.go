package slack

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// CommandReply is a slash command's answer, sent as the acknowledgement.
type CommandReply struct {
	ResponseType string `json:"response_type"` // "ephemeral": only the caller sees it
	Text         string `json:"text"`
}

func ephemeral(format string, args ...any) CommandReply {
	return CommandReply{ResponseType: "ephemeral", Text: fmt.Sprintf(format, args...)}
}

// command answers the slash command: run <routine> [extra input],
// routines, approvals, help. The answer is ephemeral; a routine's output
// is posted to the channel when its run finishes.
func (h *Handler) command(ctx context.Context, req Request) (any, error) {
	cmd, ic := req.Command, h.cfg.Interact
	name := cmp.Or(ic.Command, "agentgate")
	if cmd.Name != name {
		return ephemeral("This app answers `/%s`, not `/%s`.", name, cmd.Name), nil
	}
	sub, rest, _ := strings.Cut(cmd.Text, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(sub) {
	case "", "help":
		return ephemeral(commandHelp, name), nil
	case "routines":
		return h.listRoutines(ctx, cmd, name)
	case "run":
		return h.runRoutine(ctx, cmd, name, rest, req.DedupeKey)
	case "approvals":
		return h.myApprovals(ctx, cmd, name)
	}
	return ephemeral("Unknown command `%s`.\n"+commandHelp, escapeMrkdwn(sub), name), nil
}

const commandHelp = "*/%[1]s* talks to agentgate:\n" +
	"• `/%[1]s run <routine> [extra input]` runs a routine now; its output is posted here\n" +
	"• `/%[1]s routines` lists the routines\n" +
	"• `/%[1]s approvals` lists the requests waiting for your decision\n" +
	"• `/%[1]s help` shows this\n" +
	"Mention the bot in a channel or write to it directly to talk to an agent."

// dialect writes command answers in mrkdwn; times show in each reader's
// zone.
func dialect(name string) chat.Dialect {
	return chat.Dialect{
		Text: escapeMrkdwn, Bold: func(s string) string { return "*" + s + "*" },
		Code: func(s string) string { return "`" + escapeMrkdwn(s) + "`" },
		Date: func(t time.Time) string {
			return slackDate(t, "{date_short_pretty} {time}", t.UTC().Format("Jan 2 15:04 UTC"))
		},
		Bullet: "• ",
		Usage:  func(sub, args string) string { return strings.TrimSpace("/" + name + " " + sub + " " + args) },
	}
}

// commands are the answers shared with the other platforms.
func (h *Handler) commands() chat.Commands {
	ic := h.cfg.Interact
	return chat.Commands{Routines: ic.Routines, Decider: ic.Approvals, Store: ic.Store}
}

func (h *Handler) listRoutines(ctx context.Context, cmd *chat.Command, name string) (any, error) {
	text, err := h.commands().ListRoutines(ctx, h.asker(cmd), dialect(name))
	return ephemeral("%s", text), err
}

// key names the command: Slack delivering it again fires nothing more.
func (h *Handler) runRoutine(ctx context.Context, cmd *chat.Command, name, rest, key string) (any, error) {
	id, extra, _ := strings.Cut(rest, " ")
	text, err := h.commands().RunRoutine(ctx, h.asker(cmd), core.Binding{Platform: chat.PlatformSlack, Workspace: cmd.Workspace,
		Channel: cmd.Channel}, id, extra, "run:"+key, dialect(name))
	return ephemeral("%s", text), err
}

func (h *Handler) myApprovals(ctx context.Context, cmd *chat.Command, name string) (any, error) {
	text, err := h.commands().ListApprovals(ctx, h.asker(cmd), core.Binding{Platform: chat.PlatformSlack,
		Workspace: cmd.Workspace, Channel: cmd.Channel}, dialect(name))
	return ephemeral("%s", text), err
}

// asker is the principal giving cmd, in its channel, with its user groups.
func (h *Handler) asker(cmd *chat.Command) approval.Principal {
	p := chat.Asker(chat.PlatformSlack, cmd.Workspace, cmd.Channel, cmd.UserID)
	p.MemberOf = func(ctx context.Context, group string) (bool, error) {
		groups, err := h.groupsOf(ctx, []string{group}, cmd.UserID)
		return len(groups) > 0, err
	}
	return p
}
