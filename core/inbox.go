package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// InboxMessage is an inbound platform message in the durable inbox: a chat
// adapter appends it before it acknowledges the platform's delivery, and an
// InboxProcessor turns it into a run afterwards.
type InboxMessage struct {
	// Platform is the adapter's platform name ("slack", …).
	Platform string
	// Key is the platform's id of the message (Slack: "msg:{channel}:{ts}").
	// The inbox keeps one message per (Platform, Key): a retry or
	// redelivery is not stored again.
	Key string
	// Payload is the adapter's encoding of the message; the store keeps it
	// as it is.
	Payload []byte
	// ReceivedAt is when the delivery arrived; messages are processed in
	// this order.
	ReceivedAt time.Time
	// Attempts counts the times the message was claimed, the current claim
	// included (set by ClaimInbox).
	Attempts int
}

// SortInbox puts messages in the order ClaimInbox returns them: oldest
// ReceivedAt first, the key breaking ties.
func SortInbox(msgs []InboxMessage) {
	slices.SortFunc(msgs, func(a, b InboxMessage) int {
		if c := a.ReceivedAt.Compare(b.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}

// Inbox is the durable inbox of inbound platform messages. A message is
// waiting until it is processed: CreateRun with its Platform and Key as
// NewRun.Platform and NewRun.DedupeKey marks it processed in the run's
// transaction, SettleInbox without a run.
type Inbox interface {
	// AppendInbox stores msgs in one transaction, in order. A message whose
	// (Platform, Key) is in the inbox already, or earlier in msgs, is
	// skipped. It returns how many messages it stored.
	AppendInbox(ctx context.Context, msgs []InboxMessage) (added int, err error)
	// ClaimInbox claims for owner, until `until`, up to limit waiting
	// messages of platform whose earlier claim (if any) ended by now, oldest
	// ReceivedAt first (sorted as by SortInbox), and counts an attempt on
	// each. Replicas that claim at the same time get different messages.
	ClaimInbox(ctx context.Context, platform, owner string, now, until time.Time, limit int) ([]InboxMessage, error)
	// ReleaseInbox ends the claims owner holds on waiting messages of
	// platform, so they can be claimed again at once (a restarted node that
	// keeps its name calls it before claiming), and returns how many. With
	// unhanded (a processor that stops: the messages it holds were never
	// given to the handler), their claim's attempt is given back, so that
	// restarts do not use up the attempts of a backlog.
	ReleaseInbox(ctx context.Context, platform, owner string, unhanded bool) (int, error)
	// RetryInbox leaves a waiting message waiting, claimable again from
	// retryAt, and records why it failed.
	RetryInbox(ctx context.Context, platform, key, reason string, retryAt time.Time) error
	// SettleInbox marks a waiting message processed without a run: reason
	// is empty when it needed none, else why it could not be processed. A
	// processed message is left as it is.
	SettleInbox(ctx context.Context, platform, key, reason string, at time.Time) error
}

// InboxBacklog is how far a platform's inbox processors are behind: the
// messages stored (and acknowledged to the platform) that no run or
// settlement has processed yet, claimed ones included, and when the oldest
// of them arrived.
type InboxBacklog struct {
	Waiting int64
	Oldest  time.Time
}

// InboxBacklogger is an inbox that tells its backlog; the stores here
// implement it, the metrics read it.
type InboxBacklogger interface {
	// InboxBacklog returns the backlog of every platform that has waiting
	// messages; a platform with none is absent.
	InboxBacklog(ctx context.Context) (map[string]InboxBacklog, error)
}

// ErrInboxClosed: the inbox writer stopped; the delivery was not stored.
var ErrInboxClosed = errors.New("inbox writer is not running")

// InboxWriterConfig configures an InboxWriter.
type InboxWriterConfig struct {
	// Inbox stores the messages. Required.
	Inbox Inbox
	// MaxBatch caps the messages stored in one transaction. Default 256.
	MaxBatch int
	// Committed, when set, is called after every batch that stored at least
	// one new message (to wake an InboxProcessor).
	Committed func()
	Logger    *slog.Logger
}

// InboxWriter appends messages to the inbox with group commit: the messages
// of concurrent Append calls are stored together in one transaction, and
// each call returns once its message is durable.
type InboxWriter struct {
	cfg  InboxWriterConfig
	kick chan struct{} // has a token when pending may be non-empty

	mu      sync.Mutex
	pending []*inboxWrite
	started bool
	closed  bool          // Start returned: no more writes
	busy    bool          // a batch is being stored
	idle    chan struct{} // closed and replaced when the writer runs out of work
	idleAt  time.Time     // when it last ran out of work
}

type inboxWrite struct {
	msg  InboxMessage
	done chan error // buffered: the batcher never blocks on it
}

var inboxWrites = sync.Pool{New: func() any { return &inboxWrite{done: make(chan error, 1)} }}

// NewInboxWriter checks cfg and fills its defaults.
func NewInboxWriter(cfg InboxWriterConfig) (*InboxWriter, error) {
	if cfg.Inbox == nil {
		return nil, errors.New("inbox writer: an inbox is required")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &InboxWriter{cfg: cfg, kick: make(chan struct{}, 1), idle: make(chan struct{})}, nil
}

// Append stores m and returns once it is durable (nil, also when it was a
// duplicate). Calls made before Start wait for it. It returns ErrInboxClosed
// once Start has stopped, and ctx.Err() when ctx ends first (m may be stored
// all the same).
func (w *InboxWriter) Append(ctx context.Context, m InboxMessage) error {
	req := inboxWrites.Get().(*inboxWrite)
	req.msg = m
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		inboxWrites.Put(req)
		return ErrInboxClosed
	}
	w.pending = append(w.pending, req)
	if len(w.pending) == 1 {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	select {
	case err := <-req.done:
		req.msg = InboxMessage{}
		inboxWrites.Put(req)
		return err
	case <-ctx.Done():
		return ctx.Err() // req is abandoned, not reused: the batcher still answers it
	}
}

// Start stores the pending messages in batches until ctx ends; then it
// refuses new ones, stores those already pending and returns.
func (w *InboxWriter) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("inbox writer: already started")
	}
	w.started = true
	w.mu.Unlock()
	store := context.WithoutCancel(ctx) // a batch that was taken is stored even during shutdown
	var batch []*inboxWrite
	msgs := make([]InboxMessage, 0, w.cfg.MaxBatch)
	for {
		batch = w.take(batch[:0])
		if len(batch) == 0 {
			select {
			case <-w.kick:
				continue
			case <-ctx.Done():
			}
			w.mu.Lock()
			w.closed = true
			w.mu.Unlock()
			for batch = w.take(batch[:0]); len(batch) > 0; batch = w.take(batch[:0]) {
				msgs = w.commit(store, batch, msgs[:0])
			}
			return nil
		}
		msgs = w.commit(store, batch, msgs[:0])
	}
}

// Yield returns once the writer has had nothing to store for quiet, or
// after max, so that work sharing the store with it (the inbox processor and
// the runs it starts) lets the acknowledgements of a burst go first.
func (w *InboxWriter) Yield(ctx context.Context, quiet, max time.Duration) {
	deadline := time.Now().Add(max)
	for ctx.Err() == nil {
		w.mu.Lock()
		busy, idle, idleAt := w.busy || len(w.pending) > 0, w.idle, w.idleAt
		w.mu.Unlock()
		now := time.Now()
		wait := deadline.Sub(now)
		if !busy {
			q := idleAt.Add(quiet).Sub(now)
			if q <= 0 {
				return
			}
			wait, idle = min(wait, q), nil
		}
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-idle:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// take moves up to MaxBatch pending writes into batch.
func (w *InboxWriter) take(batch []*inboxWrite) []*inboxWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(w.pending), w.cfg.MaxBatch)
	switch {
	case n > 0:
		w.busy = true
	case w.busy:
		w.busy, w.idleAt = false, time.Now()
		close(w.idle)
		w.idle = make(chan struct{})
	}
	batch = append(batch, w.pending[:n]...)
	rest := copy(w.pending, w.pending[n:])
	clear(w.pending[rest:])
	w.pending = w.pending[:rest]
	return batch
}

// commit stores batch in one transaction and answers its writers.
func (w *InboxWriter) commit(ctx context.Context, batch []*inboxWrite, msgs []InboxMessage) []InboxMessage {
	for _, r := range batch {
		msgs = append(msgs, r.msg)
	}
	added, err := w.cfg.Inbox.AppendInbox(ctx, msgs)
	if err != nil {
		err = fmt.Errorf("append %d messages to the inbox: %w", len(msgs), err)
		w.cfg.Logger.Error("inbox write failed", "messages", len(msgs), "err", err)
	}
	for _, r := range batch {
		r.done <- err
	}
	if added > 0 && w.cfg.Committed != nil {
		w.cfg.Committed()
	}
	clear(msgs) // drop the payloads
	return msgs
}

// ErrInboxSkip is returned (wrapped, with the reason) by an InboxHandler for
// a message that needs no run; the processor marks it processed.
var ErrInboxSkip = errors.New("no run needed")

// PermanentError wraps an InboxHandler error that another attempt cannot
// fix (an unknown agent, a payload that does not decode): the message is
// marked failed at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as one that retrying will not fix.
func Permanent(err error) error { return &PermanentError{Err: err} }

// InboxHandler acts on one claimed inbox message. It returns nil once the
// message started its run: created (Engine.Submit) with the message's
// Platform and Key as the dedupe key, which marks it processed in the run's
// transaction. It returns an error wrapping ErrInboxSkip when the message
// needs no run, ErrDuplicate (as CreateRun does) when it was processed
// already, a PermanentError when it cannot be processed, and any other error
// for a failure worth retrying.
type InboxHandler func(ctx context.Context, m InboxMessage) error

// InboxProcessorConfig configures an InboxProcessor.
type InboxProcessorConfig struct {
	// Inbox holds the messages. Required.
	Inbox Inbox
	// Platform is the platform whose messages this processor takes. Required.
	Platform string
	// Handle acts on each message. Required.
	Handle InboxHandler
	// Owner names this node in inbox claims; a restarted node that keeps its
	// name takes its claimed messages back at once. Default "local".
	Owner string
	// ClaimTTL is how long a claim lasts; messages claimed by a node that
	// died are taken by another after it. Default 30s.
	ClaimTTL time.Duration
	// Batch is how many messages one claim takes. Default 64.
	Batch int
	// Poll is how often the processor looks for messages nothing announced
	// (appended by another replica, due for a retry). Default 1s.
	Poll time.Duration
	// MaxAttempts is how often a message is tried before it is marked
	// failed. Default 5.
	MaxAttempts int
	// Backoff is the delay before retry number attempt. Default DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// Yield, when set, is called before each claim and each message; it
	// may wait (the Slack adapter waits while its InboxWriter is storing a
	// burst, so acknowledgements go first).
	Yield  func(ctx context.Context)
	Clock  Clock
	Logger *slog.Logger
}

// InboxProcessor takes the waiting messages of one platform from the inbox
// in the order they arrived and hands them to its handler, one at a time.
type InboxProcessor struct {
	cfg  InboxProcessorConfig
	wake chan struct{}
}

// NewInboxProcessor checks cfg and fills its defaults.
func NewInboxProcessor(cfg InboxProcessorConfig) (*InboxProcessor, error) {
	if cfg.Inbox == nil || cfg.Platform == "" || cfg.Handle == nil {
		return nil, errors.New("inbox processor: an inbox, a platform and a handler are required")
	}
	if cfg.Owner == "" {
		cfg.Owner = "local"
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = 30 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &InboxProcessor{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Wake tells the processor that messages were appended. It never blocks.
func (p *InboxProcessor) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start takes back the messages this owner had claimed, then processes
// waiting messages until ctx ends. The message in hand is finished; the rest
// of its batch is released for the next start or another node.
func (p *InboxProcessor) Start(ctx context.Context) error {
	log := p.cfg.Logger.With("platform", p.cfg.Platform)
	// The message in hand when this owner last stopped, if it crashed, may
	// be what crashed it: its attempt counts.
	if n, err := p.cfg.Inbox.ReleaseInbox(ctx, p.cfg.Platform, p.cfg.Owner, false); ctx.Err() != nil {
		return nil // stopped before it began
	} else if err != nil {
		return fmt.Errorf("inbox processor: release claims of %s: %w", p.cfg.Owner, err)
	} else if n > 0 {
		log.Info("resuming inbox messages", "messages", n)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := p.cfg.Inbox.ReleaseInbox(rctx, p.cfg.Platform, p.cfg.Owner, true); err != nil {
			log.Warn("inbox processor: release claims at stop", "err", err)
		}
	}()
	timer := time.NewTimer(p.cfg.Poll)
	defer timer.Stop()
	failures := 0
	for ctx.Err() == nil {
		p.yield(ctx)
		now := p.cfg.Clock.Now()
		msgs, err := p.cfg.Inbox.ClaimInbox(ctx, p.cfg.Platform, p.cfg.Owner, now, now.Add(p.cfg.ClaimTTL), p.cfg.Batch)
		wait := p.cfg.Poll
		switch {
		case err != nil && ctx.Err() == nil:
			failures++
			wait = min(p.cfg.Backoff(failures), p.cfg.Poll*10)
			log.Error("inbox processor: claim messages", "retry_in", wait, "err", err)
		case err == nil:
			failures = 0
			for _, m := range msgs {
				if p.yield(ctx); ctx.Err() != nil {
					break
				}
				p.process(ctx, log, m)
			}
			if len(msgs) == p.cfg.Batch {
				continue // more may be waiting
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-p.wake:
		case <-timer.C:
		}
	}
	return nil
}

func (p *InboxProcessor) yield(ctx context.Context) {
	if p.cfg.Yield != nil {
		p.cfg.Yield(ctx)
	}
}

// process hands m to the handler and records the outcome.
func (p *InboxProcessor) process(ctx context.Context, log *slog.Logger, m InboxMessage) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ClaimTTL)
	defer cancel()
	var err error
	if m.Attempts > p.cfg.MaxAttempts {
		err = Permanent(fmt.Errorf("gave up after %d attempts", p.cfg.MaxAttempts))
	} else {
		err = p.cfg.Handle(hctx, m)
	}
	var perm *PermanentError
	now := p.cfg.Clock.Now()
	switch {
	case err == nil || errors.Is(err, ErrDuplicate):
		return
	case errors.Is(err, ErrInboxSkip):
		log.Debug("inbox message needs no run", "key", m.Key, "reason", err)
		err = p.cfg.Inbox.SettleInbox(hctx, m.Platform, m.Key, "", now)
	case errors.As(err, &perm) || m.Attempts >= p.cfg.MaxAttempts:
		log.Warn("inbox message failed", "key", m.Key, "attempts", m.Attempts, "err", err)
		err = p.cfg.Inbox.SettleInbox(hctx, m.Platform, m.Key, err.Error(), now)
	default:
		retry := p.cfg.Backoff(m.Attempts)
		log.Warn("inbox message will be retried", "key", m.Key, "attempts", m.Attempts, "retry_in", retry, "err", err)
		err = p.cfg.Inbox.RetryInbox(hctx, m.Platform, m.Key, err.Error(), now.Add(retry))
	}
	if err != nil {
		// The claim runs out and the message is tried again.
		log.Error("inbox processor: record outcome", "key", m.Key, "err", err)
	}
}
