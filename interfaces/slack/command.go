package slack

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

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
	cmds := chat.Commands{Routines: ic.Routines, Decider: ic.Approvals, Store: ic.Store}
	asker := h.withGroups(chat.Asker(chat.PlatformSlack, cmd.Workspace, cmd.Channel, cmd.UserID), cmd.UserID)
	here := core.Binding{Platform: chat.PlatformSlack, Workspace: cmd.Workspace, Channel: cmd.Channel}
	var text string
	var err error
	switch strings.ToLower(sub) {
	case "", "help":
		return ephemeral(commandHelp, name), nil
	case "routines":
		text, err = cmds.ListRoutines(ctx, asker, dialect(name))
	case "run":
		// The key names the command: Slack delivering it again fires nothing more.
		id, extra, _ := strings.Cut(strings.TrimSpace(rest), " ")
		text, err = cmds.RunRoutine(ctx, asker, here, id, extra, "run:"+req.DedupeKey, dialect(name))
	case "approvals":
		text, err = cmds.ListApprovals(ctx, asker, here, dialect(name))
	default:
		return ephemeral("Unknown command `%s`.\n"+commandHelp, escapeMrkdwn(sub), name), nil
	}
	return ephemeral("%s", text), err
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
