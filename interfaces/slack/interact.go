package slack

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// InteractConfig is what approval clicks and slash commands need. Without
// Approvals, clicks are acknowledged and ignored; without Routines, the
// slash command's run and routines answer that routines are not available.
type InteractConfig struct {
	Approvals chat.Decider
	Store     chat.ApprovalLister
	Client    *Client
	Routines  chat.RoutineRunner
	// Command is the slash command's name without the slash; default
	// "agentgate".
	Command string
}

// denyCallbackID names the modal that asks for a deny reason.
const denyCallbackID = "agentgate_deny"

// denyMeta is the deny modal's private_metadata: where the click was.
type denyMeta struct {
	ApprovalID string `json:"approval_id"`
	Channel    string `json:"channel"`
	Thread     string `json:"thread,omitempty"`
	// Message is the card that was clicked (its ts): the submission counts
	// as a click there.
	Message string `json:"message,omitempty"`
}

// Block and action ids of the deny modal's reason input.
const (
	reasonBlockID  = "reason"
	reasonActionID = "reason"
)

// DenyModal is the modal a Deny click opens: the optional reason, then Deny.
func DenyModal(c chat.ApprovalCard, meta string) slackapi.ModalViewRequest {
	input := slackapi.NewPlainTextInputBlockElement(slackapi.NewTextBlockObject(slackapi.PlainTextType, "Why not? (optional)", false, false), reasonActionID)
	input.Multiline = true
	input.MaxLength = 500
	reason := slackapi.NewInputBlock(reasonBlockID, slackapi.NewTextBlockObject(slackapi.PlainTextType, "Reason", false, false), nil, input)
	reason.Optional = true
	return slackapi.ModalViewRequest{
		Type:            slackapi.VTModal,
		CallbackID:      denyCallbackID,
		Title:           slackapi.NewTextBlockObject(slackapi.PlainTextType, "Deny request", false, false),
		Submit:          slackapi.NewTextBlockObject(slackapi.PlainTextType, "Deny", false, false),
		Close:           slackapi.NewTextBlockObject(slackapi.PlainTextType, "Cancel", false, false),
		PrivateMetadata: meta,
		Blocks: slackapi.Blocks{BlockSet: []slackapi.Block{
			slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType,
				fmt.Sprintf("Deny *%s* running `%s`?", escapeMrkdwn(c.Agent), escapeMrkdwn(c.Tool)), false, false), nil, nil),
			reason,
		}},
	}
}

// parseDenySubmission reads the deny modal's submission: a confirmed Deny.
func parseDenySubmission(cb slackapi.InteractionCallback) (Request, error) {
	var meta denyMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil || !core.ValidID(meta.ApprovalID) {
		return Request{}, malformed("deny modal without its approval in private_metadata")
	}
	if cb.User.ID == "" {
		return Request{}, malformed("view_submission without user")
	}
	var reason string
	if cb.View.State != nil {
		reason = strings.TrimSpace(cb.View.State.Values[reasonBlockID][reasonActionID].Value)
	}
	return Request{
		Kind:      KindAction,
		DedupeKey: "view:" + cb.View.ID + ":" + cb.View.Hash,
		Action: &chat.Action{
			Platform: chat.PlatformSlack, Workspace: cmp.Or(cb.Team.ID, cb.User.TeamID), Channel: meta.Channel, Thread: meta.Thread, MessageRef: meta.Message,
			UserID: cb.User.ID, ActionID: chat.ActionDeny, ApprovalID: meta.ApprovalID,
			Confirmed: true, Reason: reason,
		},
	}, nil
}

// action handles a click on an approval card's button, or the deny modal's
// submission: the clicker is checked against the tool's approver policy (a
// refusal is shown to them alone and changes nothing), Deny first asks for a
// reason, and the decision goes through the approvals service. The card is
// edited by the approval job the decision commits.
func (h *Handler) action(ctx context.Context, req Request) error {
	act, ic := req.Action, h.cfg.Interact
	p := h.withGroups(chat.Clicker(act), act.UserID)
	askReason := act.TriggerID != "" && ic.Client != nil
	c, err := chat.Decide(ctx, ic.Store, ic.Approvals, argsRoom, act, p, askReason)
	if err != nil {
		return err
	}
	if c.Outcome == chat.AskReason {
		run, err := ic.Store.GetRun(ctx, c.Approval.RunID)
		if err != nil {
			return err
		}
		a := c.Approval
		meta, _ := json.Marshal(denyMeta{ApprovalID: a.ID, Channel: act.Channel, Thread: act.Thread, Message: act.MessageRef})
		err = ic.Client.OpenView(ctx, act.TriggerID, DenyModal(chat.Card(a, run, Approvers), string(meta)))
		if err == nil {
			return nil // the decision comes with the modal's submission
		}
		h.log.Warn("slack deny modal could not open; denying without a reason", "approval", a.ID, "err", err)
		act.Confirmed = true
		if c, err = chat.Decide(ctx, ic.Store, ic.Approvals, argsRoom, act, p, false); err != nil {
			return err
		}
	}
	switch c.Outcome {
	case chat.Decided:
		h.log.Info("slack approval decided", "approval", c.Approval.ID, "by", p.ID, "action", act.ActionID)
	case chat.Refused:
		h.log.Info("slack approval click refused", "approval", c.Approval.ID, "user", act.UserID, "why", c.Why)
		fallthrough
	default:
		h.tell(act.Channel, act.Thread, act.UserID, c.Text(Approvers, decider))
	}
	return nil
}

// withGroups is p (Slack user user) with its membership of Slack user
// groups answered by usergroups.users.list.
func (h *Handler) withGroups(p approval.Principal, user string) approval.Principal {
	p.MemberOf = func(ctx context.Context, group string) (bool, error) {
		c := h.cfg.Interact.Client
		if !isSlackGroupID(group) || c == nil {
			return false, nil
		}
		members, err := c.GroupMembers(ctx, group)
		if err != nil {
			return false, fmt.Errorf("members of user group %s: %w", group, err)
		}
		return slices.Contains(members, user), nil
	}
	return p
}

// tell shows text to user alone, after the request was acknowledged; a
// failure is logged (nothing depends on it).
func (h *Handler) tell(channel, thread, user, text string) {
	c := h.cfg.Interact.Client
	if c == nil || channel == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Tell(ctx, channel, thread, user, text); err != nil {
			h.log.Warn("slack ephemeral reply", "channel", channel, "user", user, "err", err)
		}
	}()
}
