package telegram

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-telegram/bot/models"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Commands are the bot's commands, registered with setMyCommands.
var Commands = []models.BotCommand{
	{Command: "run", Description: "Run a routine now: /run <routine> [extra input]"},
	{Command: "routines", Description: "List the routines"},
	{Command: "approvals", Description: "Requests waiting for your decision"},
	{Command: "new", Description: "Start a fresh conversation"},
	{Command: "help", Description: "What this bot does"},
}

// callback decides the approval of a click on an inline keyboard button:
// the clicker (their Telegram user id) is checked against the tool's
// approver policy, and the callback query is answered with the outcome.
// Deny first asks the clicker for a reason, in a message they reply to
// (ForceReply); that reply (a confirmed deny, without a callback query)
// decides, and is answered in the chat. The card itself is edited by the
// approval job the decision commits.
func (h *Handler) callback(ctx context.Context, key string, req Request) error {
	act := req.Action
	if act.Confirmed { // the reply with a reason counts as a click on the card
		if _, ref, err := h.cfg.Outbox.SendRef(ctx, cardKey(act.ApprovalID)); err == nil {
			act.MessageRef = ref
		} else if !errors.Is(err, core.ErrNotFound) {
			return err
		}
	}
	c, err := chat.Decide(ctx, h.cfg.Store, h.cfg.Approvals, act, chat.Clicker(act), true)
	if err != nil {
		return err
	}
	switch c.Outcome {
	case chat.AskReason:
		return h.askReason(ctx, key, req, c.Approval)
	case chat.Refused:
		h.log.Info("telegram approval click refused", "approval", act.ApprovalID, "user", act.UserID, "why", c.Why)
	case chat.Decided:
		h.log.Info("telegram approval decided", "approval", act.ApprovalID, "by", act.UserID, "action", act.ActionID)
	}
	chatID, _ := ChatID(act.Channel) // 0 (no message): nobody is looked up
	answer := c.Text(func(ids []string) string { return lookUp(ctx, h.cfg.Client, chatID, ids...).plainList(ids) },
		func(by string) string { return lookUp(ctx, h.cfg.Client, chatID, by).plainList([]string{by}) })
	if req.CallbackID == "" {
		return h.tell(ctx, "telegram:"+key+":answer", act.Channel, act.Thread, Escape(answer))
	}
	h.answer(ctx, req, answer)
	return nil
}

// askReason posts the question a Deny click answers with its reason, and
// tells the clicker where to reply.
func (h *Handler) askReason(ctx context.Context, key string, req Request, a core.Approval) error {
	act := req.Action
	id, err := ChatID(act.Channel)
	if err != nil {
		return core.Permanent(err)
	}
	who := act.UserName
	if who == "" {
		who = "You"
	}
	text := Escape(fmt.Sprintf(reasonPrompt, who, a.Tool, a.ID, noReason))
	force := &models.ForceReply{ForceReply: true, Selective: true, InputFieldPlaceholder: "Why deny " + a.Tool + "?"}
	s := sender{outbox: h.cfg.Outbox, client: h.cfg.Client, clock: h.cfg.Clock, log: h.log}
	if _, err := s.postOnce(ctx, "telegram:"+key+":reason", id, threadID(act.Thread), text, force); err != nil {
		return err
	}
	h.answer(ctx, req, "Reply to my message with a reason to deny.")
	return nil
}

// answer answers the callback query of req; it may be too old to answer,
// which changes nothing.
func (h *Handler) answer(ctx context.Context, req Request, text string) {
	if err := h.cfg.Client.AnswerCallback(ctx, req.CallbackID, text); err != nil {
		h.log.Warn("telegram answerCallbackQuery", "approval", req.Action.ApprovalID, "err", err)
	}
}

const helpText = "I connect this chat to an agent. In a private chat, write to me; in a group, mention me or reply to me.\n" +
	"/run <routine> [extra input] runs a routine now; its output is posted here\n" +
	"/routines lists the routines\n" +
	"/approvals lists the requests waiting for your decision\n" +
	"/new starts a fresh conversation\n" +
	"/help shows this"

// command answers a command in its chat (and topic), once per update.
func (h *Handler) command(ctx context.Context, key string, req Request) error {
	cmd := req.Command
	var text string
	var err error
	switch cmd.Name {
	case "help", "start":
		text = helpText
	case "routines":
		text, err = h.listRoutines(ctx, cmd)
	case "run":
		text, err = h.runRoutine(ctx, cmd, req.Thread, key)
	case "approvals":
		text, err = h.pendingApprovals(ctx, cmd)
	case "new":
		return h.fresh(ctx, cmd, req.Thread)
	default:
		text = "Unknown command /" + cmd.Name + ".\n" + helpText
	}
	if err != nil {
		return err
	}
	return h.tell(ctx, "telegram:cmd:"+key, cmd.Channel, req.Thread, Escape(text))
}

// listRoutines lists the routines the asker may run here.
func (h *Handler) listRoutines(ctx context.Context, cmd *chat.Command) (string, error) {
	if h.cfg.Routines == nil {
		return "Routines are not available on this gateway.", nil
	}
	page, err := h.cfg.Routines.List(ctx, core.RoutineFilter{ListOptions: core.ListOptions{Limit: 50}})
	if err != nil || len(page.Items) == 0 {
		return "No routines are defined. Add them under routines: in the config file.", err
	}
	items, err := chat.Callable(ctx, h.cfg.Approvals, chat.Asker(chat.PlatformTelegram, "", cmd.Channel, cmd.UserID), page.Items)
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return "No routine here lets you run it (their callers: leave you out).", nil
	}
	var b strings.Builder
	b.WriteString("Routines you may run:\n")
	for _, r := range items {
		state := "on"
		if !r.Enabled {
			state = "off"
		}
		fmt.Fprintf(&b, "• %s (%s) — agent %s, %s\n", r.ID, state, r.AgentID, r.Schedule)
	}
	return b.String(), nil
}

// key names the update: a redelivery fires nothing more.
func (h *Handler) runRoutine(ctx context.Context, cmd *chat.Command, thread, key string) (string, error) {
	if h.cfg.Routines == nil || h.cfg.Approvals == nil {
		return "Routines are not available on this gateway.", nil
	}
	id, extra, _ := strings.Cut(cmd.Text, " ")
	if id == "" {
		return "Which routine? /run <routine> [extra input]; /routines lists them.", nil
	}
	run, err := h.cfg.Approvals.Trigger(ctx, h.cfg.Routines, chat.Asker(chat.PlatformTelegram, "", cmd.Channel, cmd.UserID), id,
		strings.TrimSpace(extra), core.Binding{Platform: chat.PlatformTelegram, Channel: cmd.Channel, Thread: thread}, "run:"+key)
	var inputErr *core.InputError
	var nc *approval.NotCallerError
	switch {
	case errors.Is(err, core.ErrNotFound):
		return fmt.Sprintf("No routine %q; /routines lists them.", id), nil
	case errors.As(err, &nc):
		return fmt.Sprintf("You may not run routine %s: %s.", id, nc.Why), nil
	case errors.As(err, &inputErr):
		return err.Error(), nil
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("Running %s (run %s); its output will be posted here.", id, run.ID), nil
}

// pendingApprovals lists what the asker may decide in this chat.
func (h *Handler) pendingApprovals(ctx context.Context, cmd *chat.Command) (string, error) {
	if h.cfg.Store == nil || h.cfg.Approvals == nil {
		return "Approvals are not available here.", nil
	}
	p := chat.Asker(chat.PlatformTelegram, "", cmd.Channel, cmd.UserID)
	items, err := chat.Decidable(ctx, h.cfg.Store, h.cfg.Approvals, core.Binding{Platform: chat.PlatformTelegram, Channel: cmd.Channel}, p)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, a := range items {
		fmt.Fprintf(&b, "• %s: %s, expires %s\n", a.ID, a.Tool, a.ExpiresAt.UTC().Format("Jan 2 15:04 UTC"))
	}
	if b.Len() == 0 {
		return "No requests in this chat are waiting for your decision.", nil
	}
	return "Waiting for your decision in this chat:\n" + b.String(), nil
}
