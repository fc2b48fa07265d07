package chat

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentgate/agentgate/core"
)

// Intake is what every platform's handler takes in common: where the runs
// of its messages go, where messages wait before they are acted on, and
// where their files are kept.
type Intake struct {
	Engine Submitter // required
	// Inbox is where messages for the bot are stored before they are
	// acknowledged (required; a redelivery is stored once); the handler's
	// Start acts on them from there.
	Inbox core.Inbox
	// DefaultAgent answers where no route names an agent. Required.
	DefaultAgent string
	// Blobs keeps the files people send the bot; nil: the agent only reads
	// their names. Files over MaxFileBytes (default DefaultMaxFileBytes)
	// are not stored.
	Blobs        core.Blobs
	MaxFileBytes int64
	// NodeID names this node in inbox claims (AGENTGATE_NODE_ID); a node
	// that restarts under its name takes its claimed messages back at once.
	// Default "local".
	NodeID string
	Clock  core.Clock
	Logger *slog.Logger
}

// Check says what the intake of platform's handler lacks, and fills the
// clock and logger left nil.
func (c *Intake) Check(platform string) error {
	switch {
	case c.Engine == nil || c.Inbox == nil:
		return errors.New(platform + ": the handler needs an engine and an inbox")
	case c.DefaultAgent == "":
		return errors.New(platform + ": the handler needs a default agent")
	}
	Defaults(&c.Clock, &c.Logger)
	return nil
}

// NewIntakeInbox is platform's durable inbox, whose entries (T, JSON) handle
// acts on (Entries).
func NewIntakeInbox[T any](c Intake, platform string, handle func(ctx context.Context, key string, entry T) error) (*Inbox, error) {
	return NewInbox(InboxConfig{Inbox: c.Inbox, Platform: platform, Owner: c.NodeID, Clock: c.Clock, Logger: c.Logger,
		Handle: Entries(platform, handle)})
}

// Files stores the attachments of a message, fetched by fetch; tooLarge
// tells its sender of one over the limit.
func (c Intake) Files(fetch Fetcher, tooLarge func(ctx context.Context, text string)) Files {
	return Files{Blobs: c.Blobs, Fetcher: fetch, Max: c.MaxFileBytes, Logger: c.Logger, TooLarge: tooLarge}
}
