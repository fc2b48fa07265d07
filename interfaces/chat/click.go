package chat

import (
	"context"
	"errors"
	"fmt"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
)

// Outcome is what a click on an approval card came to.
type Outcome int

const (
	// Decided: the click decided the approval (Click.Approval is the
	// decided approval); the approval job it committed edits the card.
	Decided Outcome = iota
	// Refused: the approver policy leaves the clicker out (Click.Why);
	// nothing changed.
	Refused
	// NotPending: the approval was decided, expired or cancelled before.
	NotPending
	// Missing: there is no such approval.
	Missing
	// AskReason: a Deny the clicker may make, not confirmed yet; the
	// platform asks them for a reason (a dialog, a reply) and clicks again
	// with Action.Confirmed.
	AskReason
	// Unavailable: approvals are not wired on this gateway.
	Unavailable
	// ArgsCut: an Approve on a pending approval whose arguments the
	// platform's card cannot show in full (its ArgsRoom), which therefore
	// offers no Approve: an old card or a forged click. Click.Why says where
	// to approve instead (CutNote); nothing changed.
	ArgsCut
)

// Click is the outcome of a click on an approval card.
type Click struct {
	Outcome  Outcome
	Approval core.Approval // as it is now (empty when Missing)
	Why      string        // Refused: why the policy leaves the clicker out; ArgsCut: CutNote
}

// ClickStore reads approvals; core.Store is one.
type ClickStore interface {
	GetApproval(ctx context.Context, id string) (core.Approval, error)
}

// Decide turns a click on an approval card into a decision, the same way
// on every platform: p (Clicker(act), with what the platform knows of their
// groups) is checked against the approval's policy by the approvals
// service, which decides, records and audits. With askReason, a Deny not
// yet Confirmed comes back as AskReason once the clicker may make it. An
// Approve of a pending approval whose arguments do not fit room, the
// platform's card's room (the one its renderer shows them in), is ArgsCut,
// whoever clicks: nobody approves arguments the card did not show. d nil
// (approvals not wired) is Unavailable. An error is a failure to retry.
func Decide(ctx context.Context, st ClickStore, d Decider, room ArgsRoom, act *Action, p approval.Principal, askReason bool) (Click, error) {
	if d == nil || st == nil {
		return Click{Outcome: Unavailable}, nil
	}
	a, err := st.GetApproval(ctx, act.ApprovalID)
	if errors.Is(err, core.ErrNotFound) {
		return Click{Outcome: Missing}, nil
	}
	if err != nil {
		return Click{}, err
	}
	approve := act.ActionID == ActionApprove
	if approve && a.Status == core.ApprovalPending {
		if shown := room.Fit(CardArgs(a.Arguments)); shown.Cut {
			return Click{Outcome: ArgsCut, Approval: a, Why: CutNote(a.ID, shown)}, nil
		}
	}
	if askReason && !approve && !act.Confirmed {
		err := d.Authorize(ctx, a, p, false)
		if why, ok := errors.AsType[*approval.NotAllowedError](err); ok {
			return Click{Outcome: Refused, Approval: a, Why: why.Why}, nil
		}
		if err != nil {
			return Click{}, err
		}
		if a.Status != core.ApprovalPending {
			return Click{Outcome: NotPending, Approval: a}, nil
		}
		return Click{Outcome: AskReason, Approval: a}, nil
	}
	decided, err := d.Decide(ctx, a.ID, approval.Request{Approve: approve, Principal: p, Reason: act.Reason, ArgsSHA256: a.ArgsSHA256})
	if why, ok := errors.AsType[*approval.NotAllowedError](err); ok {
		return Click{Outcome: Refused, Approval: a, Why: why.Why}, nil
	}
	if _, ok := errors.AsType[*core.NotPendingError](err); ok {
		if now, err := st.GetApproval(ctx, a.ID); err == nil {
			a = now
		}
		return Click{Outcome: NotPending, Approval: a}, nil
	}
	if err != nil {
		return Click{}, err
	}
	return Click{Outcome: Decided, Approval: decided}, nil
}

// Text is what to tell the clicker of c, in plain words: approvers renders
// the policy's approver ids and decider the person who decided, the
// platform's way. Empty for AskReason.
func (c Click) Text(approvers func(ids []string) string, decider func(by string) string) string {
	switch c.Outcome {
	case Decided:
		if c.Approval.Status == core.ApprovalApproved {
			return "Approved."
		}
		return "Denied."
	case Refused:
		return fmt.Sprintf("You may not decide this request: %s. Who may: %s.", c.Why, WhoMay(c.Approval, approvers))
	case NotPending:
		return AlreadyDecided(c.Approval, decider(DeciderShown(c.Approval)))
	case Missing:
		return "This approval does not exist (any more)."
	case Unavailable:
		return "Approvals are not available on this gateway."
	case ArgsCut:
		return c.Why
	}
	return ""
}
