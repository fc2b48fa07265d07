package telegram

import (
	"context"
	"errors"
	"strconv"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Fresh conversations (/new): each /new in a chat (or forum topic) posts a
// "fresh conversation" message through the outbox under the key
// freshKey(chat, topic, n), n = 1, 2, …; the conversation's session is the
// chat's own plus the number of those messages (its generation). The outbox
// is where the bot's messages are recorded already, so the generation
// needs no table of its own, and it survives restarts and replicas.

func freshKey(channel, thread string, n int) string {
	return "telegram:new:" + channel + ":" + thread + ":" + strconv.Itoa(n)
}

// generation returns how many fresh conversations the chat (or topic) has
// started: the highest n whose freshKey is recorded (they are recorded one
// after another), found in O(log n) lookups.
func (h *Handler) generation(ctx context.Context, channel, thread string) (int, error) {
	recorded := func(n int) (bool, error) {
		_, _, err := h.cfg.Outbox.SendRef(ctx, freshKey(channel, thread, n))
		if errors.Is(err, core.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	lo, hi := 0, 1 // recorded(lo) (or lo = 0), hi to be found unrecorded
	for {
		ok, err := recorded(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := recorded(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// sessionFor is the session of a message for agent: SessionID in the
// chat's current generation.
func (h *Handler) sessionFor(ctx context.Context, agent string, in chat.Inbound) (string, error) {
	gen, err := h.generation(ctx, in.Channel, in.Thread)
	if err != nil || gen == 0 {
		return SessionID(agent, in), err
	}
	in.Thread += ":new" + strconv.Itoa(gen)
	return SessionID(agent, in), nil
}

// fresh starts a fresh conversation in the command's chat (or topic).
func (h *Handler) fresh(ctx context.Context, cmd *chat.Command, thread string) error {
	gen, err := h.generation(ctx, cmd.Channel, thread)
	if err != nil {
		return err
	}
	id, err := ChatID(cmd.Channel)
	if err != nil {
		return err
	}
	s := h.sender()
	for n := gen + 1; n <= gen+8; n++ { // another replica may take n first
		res, err := s.postOnce(ctx, freshKey(cmd.Channel, thread, n), id, threadID(thread),
			Escape("Started a fresh conversation: the agent no longer sees what was said before."), nil)
		if err != nil || res.Posted {
			return err
		}
	}
	return nil
}
