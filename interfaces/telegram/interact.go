package telegram

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"

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
		if _, ref, err := h.cfg.Outbox.SendRef(ctx, core.CardKey(chat.PlatformTelegram, act.ApprovalID)); err == nil {
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
		return err
	}
	who := cmp.Or(act.UserName, "You")
	text := Escape(fmt.Sprintf(reasonPrompt, who, a.Tool, a.ID, noReason))
	force := &models.ForceReply{ForceReply: true, Selective: true, InputFieldPlaceholder: "Why deny " + a.Tool + "?"}
	s := h.sender()
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
	p := chat.Asker(chat.PlatformTelegram, "", cmd.Channel, cmd.UserID)
	c := chat.Commands{Routines: h.cfg.Routines, Decider: h.cfg.Approvals, Store: h.cfg.Store}
	var text string
	var err error
	switch cmd.Name {
	case "help", "start":
		text = Escape(helpText)
	case "routines":
		text, err = c.ListRoutines(ctx, p, dialect)
	case "run":
		id, extra, _ := strings.Cut(cmd.Text, " ")
		text, err = c.RunRoutine(ctx, p, core.Binding{Platform: chat.PlatformTelegram, Channel: cmd.Channel, Thread: req.Thread},
			id, extra, "run:"+key, dialect)
	case "approvals":
		text, err = c.ListApprovals(ctx, p, core.Binding{Platform: chat.PlatformTelegram, Channel: cmd.Channel}, dialect)
	case "new":
		return h.fresh(ctx, cmd, req.Thread)
	default:
		text = Escape("Unknown command /" + cmd.Name + ".\n" + helpText)
	}
	if err != nil {
		return err
	}
	return h.tell(ctx, "telegram:cmd:"+key, cmd.Channel, req.Thread, text)
}

// dialect writes command answers in MarkdownV2, times in UTC.
var dialect = chat.Dialect{
	Text: Escape, Bold: func(s string) string { return "*" + s + "*" },
	Code:   func(s string) string { return "`" + escapeCode(s) + "`" },
	Date:   func(t time.Time) string { return Escape(chat.UTC(t)) },
	Bullet: Escape("• "),
	Usage:  func(sub, args string) string { return strings.TrimSpace("/" + sub + " " + args) },
}
