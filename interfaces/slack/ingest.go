package slack

import (
	"context"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// inboxEntry is what the inbox keeps of a Slack message: the neutral
// message, as the processor needs it to start the run.
type inboxEntry struct {
	EventID string       `json:"event_id,omitempty"`
	Message chat.Inbound `json:"message"`
}

// Start runs the inbox writer and processor until ctx ends: the writer
// stores the messages ServeHTTP and Dispatch accept, the processor starts
// their runs in the order they arrived. Stop the HTTP server (and Socket
// Mode) first: messages accepted after Start returns are refused (answered
// 500, so Slack sends them again).
func (h *Handler) Start(ctx context.Context) error { return h.inbox.Run(ctx) }
