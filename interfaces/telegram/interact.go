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
// (ForceReply); that reply (a confirmed deny, without a callback query,
// once isPrompt found the message it replies to is that prompt) decides,
// and is answered in the chat. The card itself is edited by the
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
	c, err := chat.Decide(ctx, h.cfg.Store, h.cfg.Approvals, argsRoom, act, chat.Clicker(act), true)
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
// tells the clicker where to reply. The question is posted once per
// approval, clicker and chat (reasonKey): a second click points to the
// first, which stays the one to reply to. A new one is posted only when
// the earlier posts' outcome is unknown (SendUncertain), up to
// maxReasonPrompts.
func (h *Handler) askReason(ctx context.Context, key string, req Request, a core.Approval) error {
	act := req.Action
	id, err := ChatID(act.Channel)
	if err != nil {
		return err
	}
	who := cmp.Or(act.UserName, "You")
	text := Escape(fmt.Sprintf(reasonPrompt, a.ID, who, a.Tool, noReason))
	force := &models.ForceReply{ForceReply: true, Selective: true, InputFieldPlaceholder: "Why deny " + a.Tool + "?"}
	s := h.sender()
	for n := range maxReasonPrompts {
		k := reasonKey(a.ID, act.Channel, act.UserID, n)
		state, _, err := h.cfg.Outbox.SendRef(ctx, k)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		if state == core.SendUncertain {
			continue // maybe posted, but its message id is unknown: a reply to it could not count
		}
		sent, err := s.postOnce(ctx, k, id, threadID(act.Thread), text, force)
		if err != nil {
			return err
		}
		switch {
		case sent.Posted:
			h.answer(ctx, req, "Reply to my message with a reason to deny.")
		case sent.State == core.SendSent:
			h.answer(ctx, req, "I asked you already: reply to my earlier message asking why, with a reason to deny.")
		default:
			h.answer(ctx, req, "I could not tell whether my question reached the chat, and a reply to it would not count: click Deny again.")
		}
		return nil
	}
	h.log.Warn("telegram reason prompts all uncertain", "approval", a.ID, "user", act.UserID)
	h.answer(ctx, req, "I could not ask you for a reason in this chat: decide this request elsewhere, or let it expire.")
	return nil
}

// maxReasonPrompts bounds the "why deny?" prompts of one approval, clicker
// and chat: a Deny click posts another only when every earlier post ended
// uncertain.
const maxReasonPrompts = 3

// reasonKey names the outbox message of the n-th prompt asking user, in
// chat, for the reason to deny approval id. Its ref, the prompt's message
// id, is the only message a reply to gives the reason (isPrompt).
func reasonKey(approvalID, chat, user string, n int) string {
	return fmt.Sprintf("telegram:reason:%s:%s:%s:%d", approvalID, chat, user, n)
}

// isPrompt reports whether the message a KindReason replies to is a "why
// deny?" prompt the bot posted for its approval, to its sender, in its
// chat: one whose message id the outbox recorded. The text replied to
// only names the approval; anyone can make the bot repeat such a text.
func (h *Handler) isPrompt(ctx context.Context, req Request) (bool, error) {
	act := req.Action
	if req.ReplyTo == "" || act.UserID == "" {
		return false, nil
	}
	for n := range maxReasonPrompts {
		state, ref, err := h.cfg.Outbox.SendRef(ctx, reasonKey(act.ApprovalID, act.Channel, act.UserID, n))
		if errors.Is(err, core.ErrNotFound) {
			return false, nil // prompt n+1 is posted only after prompt n
		}
		if err != nil {
			return false, err
		}
		if state == core.SendSent && ref == req.ReplyTo {
			return true, nil
		}
	}
	return false, nil
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
