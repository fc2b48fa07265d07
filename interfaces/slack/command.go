package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	name := ic.Command
	if name == "" {
		name = "agentgate"
	}
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
		return h.myApprovals(ctx, cmd)
	}
	return ephemeral("Unknown command `%s`.\n"+commandHelp, escapeMrkdwn(sub), name), nil
}

const commandHelp = "*/%[1]s* talks to agentgate:\n" +
	"• `/%[1]s run <routine> [extra input]` runs a routine now; its output is posted here\n" +
	"• `/%[1]s routines` lists the routines\n" +
	"• `/%[1]s approvals` lists the requests waiting for your decision\n" +
	"• `/%[1]s help` shows this\n" +
	"Mention the bot in a channel or write to it directly to talk to an agent."

// listRoutines lists the routines the asker may run here.
func (h *Handler) listRoutines(ctx context.Context, cmd *chat.Command, name string) (any, error) {
	rr := h.cfg.Interact.Routines
	if rr == nil {
		return ephemeral("Routines are not available on this gateway."), nil
	}
	page, err := rr.List(ctx, core.RoutineFilter{ListOptions: core.ListOptions{Limit: 50}})
	if err != nil {
		return nil, err
	}
	if len(page.Items) == 0 {
		return ephemeral("No routines are defined. Add them under `routines:` in the config file."), nil
	}
	items, err := chat.Callable(ctx, h.cfg.Interact.Approvals, h.asker(cmd), page.Items)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return ephemeral("No routine here lets you run it (their `callers:` leave you out)."), nil
	}
	var b strings.Builder
	b.WriteString("*Routines you may run*\n")
	for _, r := range items {
		state := "on"
		if !r.Enabled {
			state = "off"
		}
		fmt.Fprintf(&b, "• `%s` (%s) — agent %s, `%s`", escapeMrkdwn(r.ID), state, escapeMrkdwn(r.AgentID), escapeMrkdwn(r.Schedule))
		if r.Enabled && r.NextFireAt != nil {
			b.WriteString(", next " + slackDate(*r.NextFireAt, "{date_short_pretty} {time}", r.NextFireAt.UTC().Format("Jan 2 15:04 UTC")))
		}
		b.WriteString("\n")
	}
	if page.NextCursor != "" {
		b.WriteString("…and more; `agentgate routines list` shows all.\n")
	}
	fmt.Fprintf(&b, "Run one with `/%s run <routine>`.", name)
	return ephemeral("%s", b.String()), nil
}

// key names the command: Slack delivering it again fires nothing more.
func (h *Handler) runRoutine(ctx context.Context, cmd *chat.Command, name, rest, key string) (any, error) {
	rr := h.cfg.Interact.Routines
	if rr == nil {
		return ephemeral("Routines are not available on this gateway."), nil
	}
	id, extra, _ := strings.Cut(rest, " ")
	if id == "" {
		return ephemeral("Name the routine: `/%s run <routine> [extra input]`. `/%s routines` lists them.", name, name), nil
	}
	if h.cfg.Interact.Approvals == nil {
		return ephemeral("Routines are not available on this gateway."), nil
	}
	run, err := h.cfg.Interact.Approvals.Trigger(ctx, rr, h.asker(cmd), id, extra, core.Binding{
		Platform: chat.PlatformSlack, Workspace: cmd.Workspace, Channel: cmd.Channel,
	}, "run:"+key)
	if errors.Is(err, core.ErrNotFound) {
		return ephemeral("There is no routine `%s`. `/%s routines` lists them.", escapeMrkdwn(id), name), nil
	}
	if nc, ok := errors.AsType[*approval.NotCallerError](err); ok {
		return ephemeral("You may not run routine `%s`: %s.", escapeMrkdwn(id), nc.Why), nil
	}
	if err != nil {
		return nil, err
	}
	h.log.Info("slack command started routine", "routine", id, "run", run.ID, "user", cmd.UserID)
	return ephemeral("Started routine `%s` (run `%s`). Its output will be posted in this channel.", escapeMrkdwn(id), run.ID), nil
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

// myApprovals lists the pending approvals the caller may decide.
func (h *Handler) myApprovals(ctx context.Context, cmd *chat.Command) (any, error) {
	st := h.cfg.Interact.Store
	if st == nil {
		return ephemeral("Approvals are not available on this gateway."), nil
	}
	ic := h.cfg.Interact
	if ic.Approvals == nil {
		return ephemeral("Approvals are not available on this gateway."), nil
	}
	p := h.asker(cmd)
	items, err := chat.Decidable(ctx, st, ic.Approvals, core.Binding{Platform: chat.PlatformSlack, Workspace: cmd.Workspace, Channel: cmd.Channel}, p)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	n := len(items)
	for _, a := range items {
		fmt.Fprintf(&b, "• `%s` wants to run `%s` (approval `%s`, expires %s)\n", a.RunID, escapeMrkdwn(a.Tool), a.ID,
			slackDate(a.ExpiresAt, "{date_short_pretty} {time}", a.ExpiresAt.UTC().Format("Jan 2 15:04 UTC")))
	}
	if n == 0 {
		return ephemeral("Nothing is waiting for your decision."), nil
	}
	return ephemeral("*Waiting for your decision in this channel* (%d)\n%sDecide with the buttons on their cards.", n, b.String()), nil
}
