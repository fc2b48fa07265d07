package chat

import (
	"context"
	"fmt"
	"log/slog"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
)

// What chat adapters need of the rest of agentgate, declared once for all
// of them.

// Submitter starts runs; *core.Engine is one.
type Submitter interface {
	Submit(ctx context.Context, req core.SubmitRequest) (core.Run, error)
}

// SessionGetter finds sessions; core.Store is one.
type SessionGetter interface {
	GetSession(ctx context.Context, id string) (core.Session, error)
}

// Decider decides approvals; *approval.Service is one. Adapters only turn
// a click into a principal (Clicker) and ask: the policy lives there.
type Decider interface {
	Decide(ctx context.Context, id string, req approval.Request) (core.Approval, error)
	// Authorize checks (and audits a refusal of) a decision p is about to
	// make, before a dialog asks them for a reason.
	Authorize(ctx context.Context, a core.Approval, p approval.Principal, approve bool) error
	// Check says whether p may decide a; card false leaves out the check
	// that p clicked a's card (for listing what p may decide).
	Check(ctx context.Context, a core.Approval, p approval.Principal, card bool) error
	// Trigger fires a routine for p once its callers allow p, and audits it
	// (approval.Service.Trigger; refusals are *approval.NotCallerError).
	Trigger(ctx context.Context, rr approval.Triggerer, p approval.Principal, id, extra string, b core.Binding, dedupeKey string) (core.Run, error)
	// MayTrigger says whether routine r's callers let p trigger it
	// (a *approval.NotCallerError when not).
	MayTrigger(ctx context.Context, r core.Routine, p approval.Principal) error
}

// ApprovalLister reads approvals; core.Store is one.
type ApprovalLister interface {
	GetApproval(ctx context.Context, id string) (core.Approval, error)
	ListApprovals(ctx context.Context, f core.ApprovalFilter) (core.Page[core.Approval], error)
	GetRun(ctx context.Context, id string) (core.Run, error)
	GetSession(ctx context.Context, id string) (core.Session, error)
}

// RoutineRunner lists and triggers routines; *routine.Scheduler is one.
type RoutineRunner interface {
	List(ctx context.Context, f core.RoutineFilter) (core.Page[core.Routine], error)
	Get(ctx context.Context, id string) (core.Routine, error)
	TriggerIn(ctx context.Context, m core.ManualFire) (core.Run, error)
}

// NotifierConfig configures a platform's notifier; C is its API client.
type NotifierConfig[C comparable] struct {
	Outbox core.Outbox // required: every message is posted once through it
	Client C           // required
	Clock  core.Clock
	Logger *slog.Logger
}

// Poster checks what platform's notifier needs (an outbox, a client),
// fills the clock and logger left nil and returns its post-once: posts
// recorded in the outbox, through the client; maybePosted is the platform's
// error of a post that may have gone through.
func (cfg NotifierConfig[C]) Poster(platform string, maybePosted error) (Poster[C], error) {
	var none C
	if cfg.Outbox == nil || cfg.Client == none {
		return Poster[C]{}, fmt.Errorf("%s: the notifier needs an outbox and a client", platform)
	}
	Defaults(&cfg.Clock, &cfg.Logger)
	return NewPoster(platform, cfg.Outbox, cfg.Client, cfg.Clock, cfg.Logger, maybePosted), nil
}

// Defaults fills a clock and a logger left nil: the system clock, a logger
// that discards.
func Defaults(clock *core.Clock, log **slog.Logger) {
	if clock != nil && *clock == nil {
		*clock = core.SystemClock{}
	}
	if *log == nil {
		*log = slog.New(slog.DiscardHandler)
	}
}
