package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tracing"
)

// ApprovalRenderer shows approvals in one platform's conversations: it
// posts a card with Approve / Deny buttons and edits it to the outcome.
// When to post and when to edit — once, however often and in whatever
// order the approval's jobs run — is decided here, the same way on every
// platform (cardFlow).
type ApprovalRenderer interface {
	// PostCard posts the card of approval a (of run r) in conversation b
	// under the outbox key, once (Sender.PostOnce); Sent.Ref is the
	// platform's ref of the card.
	PostCard(ctx context.Context, key string, b core.Binding, a core.Approval, r core.Run) (Sent, error)
	// EditCard replaces the card at ref by a's state.
	EditCard(ctx context.Context, ref string, b core.Binding, a core.Approval, r core.Run) error
}

// ApprovalStore is what the router reads, and the outbox the cards are
// recorded in; core.Store is one.
type ApprovalStore interface {
	GetApproval(ctx context.Context, id string) (core.Approval, error)
	GetRun(ctx context.Context, id string) (core.Run, error)
	GetSession(ctx context.Context, id string) (core.Session, error)
	core.Outbox
}

// Approvals routes the engine's approval jobs (core.JobApproval, committed
// with every change of an approval) to the renderer of the conversation the
// run belongs to, and keeps its card in step (cardFlow). Runs outside chat
// conversations are skipped.
type Approvals struct {
	Store     ApprovalStore
	Renderers map[string]ApprovalRenderer // by platform
	Clock     core.Clock                  // default: the system clock
	Logger    *slog.Logger
}

// Handle handles one core.JobApproval job. An error retries it.
func (a *Approvals) Handle(ctx context.Context, job core.Job) error {
	var p core.ApprovalJob
	if err := json.Unmarshal(job.Payload, &p); err != nil {
		return fmt.Errorf("approval job %s: %w", job.ID, err)
	}
	ap, err := a.Store.GetApproval(ctx, p.ApprovalID)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	run, err := a.Store.GetRun(ctx, ap.RunID)
	if err != nil {
		return err
	}
	b, err := Conversation(ctx, a.Store, run)
	if err != nil {
		return err
	}
	r, ok := a.Renderers[b.Platform]
	if !ok || b.Channel == "" {
		return nil
	}
	clock, log := a.Clock, a.Logger
	Defaults(&clock, &log)
	flow := cardFlow{Sender: Sender{Outbox: a.Store, Clock: clock, Logger: log, Platform: b.Platform}, Approvals: a.Store,
		Post: func(ctx context.Context, key string, ap core.Approval) (Sent, error) {
			return r.PostCard(ctx, key, b, ap, run)
		},
		Edit: func(ctx context.Context, ref string, ap core.Approval) error { return r.EditCard(ctx, ref, b, ap, run) },
	}
	ctx, span := tracing.Start(ctx, run.ID, tracing.SpanChatPost, attribute.String("agentgate.platform", b.Platform),
		attribute.String("agentgate.post", "approval card"), attribute.String("agentgate.approval.id", ap.ID))
	err = flow.Render(ctx, core.CardKey(b.Platform, ap.ID), ap)
	tracing.End(span, err)
	return err
}

// Handlers returns the engine job handler of the router.
func (a *Approvals) Handlers() map[string]func(context.Context, core.Job) error {
	return map[string]func(context.Context, core.Job) error{core.JobApproval: a.Handle}
}

// Card is the neutral card of approval a of run r. approvers renders the
// policy's approver ids the platform's way ("" when anyone may decide).
func Card(a core.Approval, r core.Run, approvers func(ids []string) string) ApprovalCard {
	c := ApprovalCard{
		ApprovalID:  a.ID,
		Agent:       r.AgentID,
		Tool:        a.Tool,
		Server:      a.Server(),
		Arguments:   CardArgs(a.Arguments),
		RequestedBy: a.RequestedBy,
		ExpiresAt:   a.ExpiresAt,
		Status:      string(a.Status),
		DecidedBy:   DeciderShown(a),
		Reason:      a.Reason,
	}
	if len(a.Policy.Approvers) > 0 && approvers != nil {
		c.Approvers = approvers(a.Policy.Approvers)
	}
	if a.Policy.ExcludeRequester {
		if c.Approvers == "" {
			c.Approvers = "anyone in this conversation"
		}
		c.Approvers += " (not the requester)"
	}
	if a.DecidedAt != nil {
		c.DecidedAt = *a.DecidedAt
	}
	return c
}

// AlreadyDecided tells whoever clicks a card that is no longer pending what
// became of it; by is the decider as the platform shows them.
func AlreadyDecided(a core.Approval, by string) string {
	switch a.Status {
	case core.ApprovalExpired:
		return "This request expired before anyone decided."
	case core.ApprovalCancelled:
		return "This request was cancelled."
	}
	return fmt.Sprintf("This request was already %s by %s.", a.Status, by)
}

// Clicker is the principal of a click on a card: the platform's user (from
// its signed payload), at the message that was clicked.
func Clicker(act *Action) approval.Principal {
	p := approval.ChatPrincipal(act.Platform, act.Workspace, act.UserID, act.UserName)
	p.Groups = act.Groups
	p.Place = &approval.Place{Platform: act.Platform, Workspace: act.Workspace, Channel: act.Channel, Message: act.MessageRef}
	return p
}

// Asker is the principal of someone writing in conversation b (a command),
// for listing what they may decide there.
func Asker(platform, workspace, channel, user string) approval.Principal {
	p := approval.ChatPrincipal(platform, workspace, user, "")
	p.Place = &approval.Place{Platform: platform, Workspace: workspace, Channel: channel}
	return p
}

// Decidable lists the pending approvals of conversation b that p may
// decide (at most 100, oldest first). In a direct message b is the DM:
// theirs.
func Decidable(ctx context.Context, st interface {
	ListApprovals(ctx context.Context, f core.ApprovalFilter) (core.Page[core.Approval], error)
}, d Decider, b core.Binding, p approval.Principal) ([]core.Approval, error) {
	const most = 100
	var out []core.Approval
	f := core.ApprovalFilter{Status: core.ApprovalPending, Conversation: &b, ListOptions: core.ListOptions{Limit: most}}
	for {
		page, err := st.ListApprovals(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, a := range page.Items {
			if d.Check(ctx, a, p, false) == nil {
				if out = append(out, a); len(out) == most {
					return out, nil
				}
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		f.Cursor = page.NextCursor
	}
}

// Callable is the routines of rs that p may trigger: what a chat command
// lists, so nobody is offered a routine whose callers leave them out. d nil
// (no policy here) keeps them all.
func Callable(ctx context.Context, d Decider, p approval.Principal, rs []core.Routine) ([]core.Routine, error) {
	if d == nil {
		return rs, nil
	}
	var out []core.Routine
	for _, r := range rs {
		err := d.MayTrigger(ctx, r, p)
		if _, refused := errors.AsType[*approval.NotCallerError](err); refused {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// WhoMay says who may decide a, as a card's approvers line does.
func WhoMay(a core.Approval, approvers func(ids []string) string) string {
	if len(a.Policy.Approvers) > 0 {
		return approvers(a.Policy.Approvers)
	}
	return "anyone in this conversation, from the request's card"
}

// DeciderShown is who decided a as a card shows them: the person's name or
// handle recorded with the decision, else the platform user id of a chat
// principal (which the adapter renders as a mention), else the principal.
func DeciderShown(a core.Approval) string {
	if a.DecidedByName != "" {
		return a.DecidedByName
	}
	id := a.DecidedBy
	for _, p := range []string{PlatformSlack, PlatformDiscord, PlatformTelegram} {
		if user, ok := strings.CutPrefix(id, p+":"); ok {
			if _, u, ok := strings.Cut(user, "/"); ok {
				return u
			}
			return user
		}
	}
	return id
}
