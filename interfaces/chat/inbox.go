package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core"
)

// InboxConfig configures an Inbox.
type InboxConfig struct {
	Inbox    core.Inbox // required
	Platform string     // required: names the platform's messages
	// Owner names this node in inbox claims (AGENTGATE_NODE_ID); a node
	// that restarts under its name takes its claimed messages back at once.
	Owner  string
	Clock  core.Clock
	Logger *slog.Logger
	// Handle starts what a stored entry asks for; its error is a
	// core.InboxHandler's (ErrInboxSkip, PermanentError, or retried).
	Handle func(ctx context.Context, key string, entry json.RawMessage) error
}

// Inbox is a chat adapter's durable inbox: what the platform sends is
// stored (Append) before it is acknowledged, and a processor acts on it
// from there, in arrival order — also after a restart, on whichever node
// claims it. During a burst the processor waits while the writer is busy,
// so acknowledgements go first.
type Inbox struct {
	cfg InboxConfig
	w   *core.InboxWriter
	p   *core.InboxProcessor
}

// The processor takes the next message once the writer has stored nothing
// for yieldQuiet, or after yieldMax: a run costs milliseconds of CPU and
// store time that acknowledgements would wait for.
const (
	yieldQuiet = 2 * time.Millisecond
	yieldMax   = 250 * time.Millisecond
)

// NewInbox checks cfg and returns the inbox.
func NewInbox(cfg InboxConfig) (*Inbox, error) {
	if cfg.Inbox == nil || cfg.Platform == "" || cfg.Handle == nil {
		return nil, errors.New("chat: an inbox needs a store, a platform and a handler")
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	b := &Inbox{cfg: cfg}
	var err error
	b.w, err = core.NewInboxWriter(core.InboxWriterConfig{Inbox: cfg.Inbox, Logger: cfg.Logger, Committed: func() { b.p.Wake() }})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Platform, err)
	}
	b.p, err = core.NewInboxProcessor(core.InboxProcessorConfig{
		Inbox: cfg.Inbox, Platform: cfg.Platform, Owner: cfg.Owner, Clock: cfg.Clock, Logger: cfg.Logger,
		Handle: func(ctx context.Context, m core.InboxMessage) error { return cfg.Handle(ctx, m.Key, m.Payload) },
		Yield:  func(ctx context.Context) { b.w.Yield(ctx, yieldQuiet, yieldMax) },
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Platform, err)
	}
	return b, nil
}

// Append stores entry (JSON) under key and returns once it is durable; an
// entry stored before under key is not stored again.
func (b *Inbox) Append(ctx context.Context, key string, entry any) error {
	payload, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("%s: encode %s: %w", b.cfg.Platform, key, err)
	}
	return b.w.Append(ctx, core.InboxMessage{Platform: b.cfg.Platform, Key: key, Payload: payload, ReceivedAt: b.cfg.Clock.Now().UTC()})
}

// Run runs the writer and the processor until ctx ends, or one of them
// fails (which stops the other: one without the other is no use). Stop
// what feeds Append first: what is appended after Run returns is refused.
func (b *Inbox) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, start := range []func(context.Context) error{b.w.Start, b.p.Start} {
		wg.Go(func() {
			if errs[i] = start(ctx); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Decode reads an entry Append stored; one that does not decode never will.
func Decode[T any](platform, key string, entry json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(entry, &v); err != nil {
		return v, core.Permanent(fmt.Errorf("%s: decode inbox message %s: %w", platform, key, err))
	}
	return v, nil
}

// Entries is an InboxConfig.Handle that decodes each entry as a T (one
// that does not decode is a permanent failure) for handle.
func Entries[T any](platform string, handle func(ctx context.Context, key string, e T) error) func(context.Context, string, json.RawMessage) error {
	return func(ctx context.Context, key string, entry json.RawMessage) error {
		e, err := Decode[T](platform, key, entry)
		if err != nil {
			return err
		}
		return handle(ctx, key, e)
	}
}
