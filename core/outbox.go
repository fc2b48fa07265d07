package core

import (
	"context"
	"time"
)

// Outbox states of a message sent to a platform.
const (
	// SendSending: the intent is recorded and the platform call may have
	// been made; found again by a later attempt it means the outcome is
	// unknown (a crash or a lost answer), and the message is not sent again.
	SendSending = "sending"
	// SendSent: the platform took the message; the ref is its id (Slack ts).
	SendSent = "sent"
	// SendFailed: the platform refused the message, nothing was posted; a
	// later attempt may claim it again.
	SendFailed = "failed"
	// SendUncertain: an attempt found the message in SendSending, or the
	// platform call's outcome was unknown; it is not sent again.
	SendUncertain = "uncertain"
)

// Outbox records the messages sent to chat platforms, intent before the
// platform call and outcome after it, so that a retried delivery never posts
// twice.
type Outbox interface {
	// ClaimSend records the intent to send the message named key (state
	// SendSending). It reports claimed = false, with the state found, when
	// an earlier attempt recorded the key already, unless that attempt
	// failed (SendFailed), which is claimed again.
	ClaimSend(ctx context.Context, key string, at time.Time) (claimed bool, state string, err error)
	// SetSendState records the outcome of a claimed send: SendSent with the
	// platform's ref, SendFailed or SendUncertain.
	SetSendState(ctx context.Context, key, state, ref string, at time.Time) error
	// ReleaseSend gives back the claim ClaimSend made at claimedAt when its
	// answer was lost (an error, though the claim may have been recorded),
	// before any platform call: the entry is SendFailed again, claimable.
	// Nothing changes when that claim was not recorded or is not the
	// entry's any more.
	ReleaseSend(ctx context.Context, key string, claimedAt time.Time) error
	// SendRef returns the state of the message named key and its platform
	// ref (set once sent), or ErrNotFound when nothing was claimed.
	SendRef(ctx context.Context, key string) (state, ref string, err error)
}

// CardKey names the outbox message of approval id's card on platform
// (slack, discord, telegram). Its ref is the card's message: the only
// message whose buttons decide the approval.
func CardKey(platform, approvalID string) string { return platform + ":approval:" + approvalID }
