package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// inboxEntry is what the inbox keeps of a Slack message: the neutral
// message, as the processor needs it to start the run.
type inboxEntry struct {
	EventID string       `json:"event_id,omitempty"`
	Message chat.Inbound `json:"message"`
}

// newInbox sets up the inbox writer and processor when cfg.Inbox is set.
func (h *Handler) newInbox() error {
	if h.cfg.Inbox == nil {
		return nil
	}
	var p *core.InboxProcessor
	w, err := core.NewInboxWriter(core.InboxWriterConfig{Inbox: h.cfg.Inbox, Logger: h.log,
		Committed: func() { p.Wake() }})
	if err != nil {
		return fmt.Errorf("slack: %w", err)
	}
	p, err = core.NewInboxProcessor(core.InboxProcessorConfig{
		Inbox: h.cfg.Inbox, Platform: chat.PlatformSlack, Handle: h.process, Owner: h.cfg.NodeID,
		Logger: h.log,
		// During a burst the processor, and so the runs it would start,
		// wait: acknowledgements go first.
		Yield: func(ctx context.Context) { w.Yield(ctx, yieldQuiet, yieldMax) },
	})
	if err != nil {
		return fmt.Errorf("slack: %w", err)
	}
	h.writer, h.proc = w, p
	return nil
}

// The inbox processor takes the next message once the writer has stored
// nothing for yieldQuiet, or after yieldMax: a run costs milliseconds of CPU
// and store time that acknowledgements would wait for, so during a burst that
// keeps the writer busy the processor starts 4 runs a second, and catches up
// after it.
const (
	yieldQuiet = 2 * time.Millisecond
	yieldMax   = 250 * time.Millisecond
)

// Start runs the inbox writer and processor until ctx ends: the writer
// stores the messages ServeHTTP and Dispatch accept, the processor starts
// their runs in the order they arrived. Without an inbox it only waits for
// ctx. Stop the HTTP server (and Socket Mode) first: messages accepted after
// Start returns are refused (answered 500, so Slack sends them again).
func (h *Handler) Start(ctx context.Context) error {
	if h.writer == nil {
		<-ctx.Done()
		return nil
	}
	return chat.RunInbox(ctx, h.writer, h.proc)
}

// enqueue stores the message of req in the inbox and returns once it is
// durable.
func (h *Handler) enqueue(ctx context.Context, req Request) error {
	payload, err := json.Marshal(inboxEntry{EventID: req.EventID, Message: *req.Message})
	if err != nil {
		return fmt.Errorf("slack: encode message %s: %w", req.DedupeKey, err)
	}
	return h.writer.Append(ctx, core.InboxMessage{
		Platform: chat.PlatformSlack, Key: req.DedupeKey, Payload: payload, ReceivedAt: h.cfg.Now(),
	})
}

// process is the inbox processor's handler: it starts the run of a stored
// message.
func (h *Handler) process(ctx context.Context, m core.InboxMessage) error {
	var e inboxEntry
	if err := json.Unmarshal(m.Payload, &e); err != nil {
		return core.Permanent(fmt.Errorf("slack: decode inbox message %s: %w", m.Key, err))
	}
	return h.start(ctx, m.Key, e.Message)
}
