package chat

import (
	"context"
	"errors"

	"github.com/agentgate/agentgate/core"
)

// cardFlow keeps one platform's approval card in step with its approval,
// the same way on every platform: the card is posted once through the
// outbox (key) while the approval is pending, edited to the outcome once
// decided, and never posted twice — a post whose outcome is unknown leaves
// no card rather than two. It tolerates jobs for the same approval running
// out of order or at once.
type cardFlow struct {
	// Sender records the card in the outbox and logs.
	Sender
	// Approvals reads an approval again after its card was posted.
	Approvals interface {
		GetApproval(ctx context.Context, id string) (core.Approval, error)
	}
	// Post posts the card of a under key, once (Sender.PostOnce).
	Post func(ctx context.Context, key string, a core.Approval) (Sent, error)
	// Edit replaces the card at the platform's ref by a's state.
	Edit func(ctx context.Context, ref string, a core.Approval) error
}

// Render brings the card of a (as it is now) up to date.
func (f cardFlow) Render(ctx context.Context, key string, a core.Approval) error {
	state, ref, err := f.Outbox.SendRef(ctx, key)
	switch {
	case errors.Is(err, core.ErrNotFound) || err == nil && state == core.SendFailed:
		res, err := f.Post(ctx, key, a)
		if err != nil || !res.Posted || a.Status != core.ApprovalPending {
			return err
		}
		// Decided while the card was being posted (that decision's job found
		// it still being posted and left the edit to us): show the outcome.
		now, err := f.Approvals.GetApproval(ctx, a.ID)
		if err != nil || now.Status == core.ApprovalPending {
			return err
		}
		return f.Edit(ctx, res.Ref, now)
	case err != nil:
		return err
	case state == core.SendSent:
		if a.Status == core.ApprovalPending {
			return nil // the card is up
		}
		return f.Edit(ctx, ref, a)
	case state == core.SendSending && a.Status == core.ApprovalPending:
		// A retry of the post that crashed or lost the platform's answer:
		// better no card (the approval can still be decided elsewhere) than two.
		f.log().Warn("approval card outcome unknown after an earlier attempt; not posting it again", "approval", a.ID, "key", key)
		return f.Outbox.SetSendState(ctx, key, core.SendUncertain, "", f.Now())
	case state == core.SendSending:
		return nil // another worker is posting it and edits it after
	}
	f.log().Warn("approval card state unknown; not edited", "approval", a.ID, "status", a.Status, "state", state)
	return nil
}
