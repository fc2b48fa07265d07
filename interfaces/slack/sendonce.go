package slack

import (
	"context"
	"errors"
	"log/slog"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/core"
)

// sender posts messages through the outbox: the intent is recorded before
// chat.postMessage and the ts after it, so a retried job never posts a
// message twice. A message whose earlier outcome is unknown is not posted
// again (it is marked uncertain and logged): a missing message is better
// than a doubled one.
type sender struct {
	outbox core.Outbox
	client *Client
	clock  core.Clock
	log    *slog.Logger
}

// sendResult says what postOnce did.
type sendResult struct {
	Posted bool   // this call posted the message
	State  string // the outbox state after the call
	TS     string // the message's ts when known
}

// postOnce posts the message named key unless an earlier attempt did or may
// have. A refusal (nothing posted) is returned as an error and the key can
// be claimed again.
func (s sender) postOnce(ctx context.Context, key, channel, thread, text string, blocks []slackapi.Block) (sendResult, error) {
	claimed, state, err := s.outbox.ClaimSend(ctx, key, s.now())
	if err != nil {
		return sendResult{}, err
	}
	if !claimed {
		if state == core.SendSending {
			s.log.Warn("slack message outcome unknown after an earlier attempt; not posting it again", "key", key, "channel", channel)
			return sendResult{State: core.SendUncertain}, s.outbox.SetSendState(ctx, key, core.SendUncertain, "", s.now())
		}
		res := sendResult{State: state}
		if state == core.SendSent {
			_, res.TS, err = s.outbox.SendRef(ctx, key)
		}
		return res, err
	}
	ts, err := s.client.Post(ctx, channel, thread, text, blocks)
	switch {
	case errors.Is(err, ErrMaybePosted):
		s.log.Warn("slack message may have been posted; not posting it again", "key", key, "err", err)
		return sendResult{State: core.SendUncertain}, s.outbox.SetSendState(ctx, key, core.SendUncertain, "", s.now())
	case err != nil: // refused or never sent: nothing was posted
		if serr := s.outbox.SetSendState(ctx, key, core.SendFailed, "", s.now()); serr != nil {
			return sendResult{}, errors.Join(err, serr)
		}
		return sendResult{State: core.SendFailed}, err
	}
	return sendResult{Posted: true, State: core.SendSent, TS: ts}, s.outbox.SetSendState(ctx, key, core.SendSent, ts, s.now())
}

func (s sender) now() time.Time { return s.clock.Now().UTC() }
