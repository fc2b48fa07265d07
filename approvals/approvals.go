// Package approval is the one decision service every channel uses (REST,
// CLI, MCP, chat buttons): it checks who may decide, binds the decision to
// the arguments that were shown, records the first decision only, and
// expires approvals nobody decided in time.
package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Requester in a policy's approvers stands for whoever started the run.
const Requester = "requester"

// ViaTimer is the channel recorded for expiries.
const ViaTimer = "timer"

// NotAllowedError: the decider is not permitted by the approval's policy.
type NotAllowedError struct {
	ApprovalID string
	By         string
	Why        string
}

func (e *NotAllowedError) Error() string {
	return fmt.Sprintf("%s may not decide approval %s: %s", e.By, e.ApprovalID, e.Why)
}

// Observer receives decision counts (Prometheus in production).
type Observer interface {
	ApprovalDecided(status core.ApprovalStatus)
}

type nopObserver struct{}

func (nopObserver) ApprovalDecided(core.ApprovalStatus) {}

// Config configures a Service. Store is required.
type Config struct {
	Store  core.Store
	Hub    *core.Hub // announces decisions to waiting readers; optional
	Clock  core.Clock
	Logger *slog.Logger
	// Observer of decisions; default none.
	Observer Observer
	// SweepInterval is how often pending approvals are checked for expiry.
	// Default 1s.
	SweepInterval time.Duration
}

// Service decides approvals.
type Service struct{ cfg Config }

// New returns a Service with cfg's defaults filled in.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Second
	}
	return &Service{cfg: cfg}
}

// Request is a human decision.
type Request struct {
	Approve bool
	// By identifies the decider (a user id on the channel, or the API key's name).
	By string
	// Groups the decider belongs to (for policies that name groups).
	Groups []string
	// Via is the channel: slack|discord|telegram|api|mcp|cli|console.
	Via    string
	Reason string
	// ArgsSHA256 is the hash of the arguments the decider was shown; when set
	// it must match the approval's (a changed request cannot be approved by
	// an old button).
	ArgsSHA256 string
}

// Decide records a decision. The first decision wins; a later one, or one
// after the approval expired, returns *core.NotPendingError and changes
// nothing. A decider the policy excludes gets *NotAllowedError.
func (s *Service) Decide(ctx context.Context, id string, req Request) (core.Approval, error) {
	a, err := s.cfg.Store.GetApproval(ctx, id)
	if err != nil {
		return a, err
	}
	if a.Status != core.ApprovalPending {
		return a, &core.NotPendingError{ID: id, Status: a.Status}
	}
	now := s.cfg.Clock.Now().UTC()
	if !now.Before(a.ExpiresAt) {
		// Its timer is due but the sweeper has not run yet: expire it now.
		if exp, err := s.expire(ctx, a); err == nil {
			return exp, &core.NotPendingError{ID: id, Status: core.ApprovalExpired}
		} else {
			return exp, err
		}
	}
	if err := Allowed(a, req.By, req.Groups); err != nil {
		return a, err
	}
	status := core.ApprovalDenied
	if req.Approve {
		status = core.ApprovalApproved
	}
	d, err := s.cfg.Store.DecideApproval(ctx, id, core.Decision{
		Status: status, By: req.By, Via: req.Via, Reason: req.Reason, ArgsSHA256: req.ArgsSHA256, At: now,
	})
	if err != nil {
		return d, err
	}
	s.decided(d)
	return d, nil
}

func (s *Service) decided(a core.Approval) {
	s.cfg.Observer.ApprovalDecided(a.Status)
	if s.cfg.Hub != nil {
		s.cfg.Hub.Changed(a.RunID)
	}
	s.cfg.Logger.Info("approval decided", "approval", a.ID, "run", a.RunID, "tool", a.Tool,
		"status", a.Status, "by", a.DecidedBy, "via", a.DecidedVia)
}

// Allowed checks decider by (with groups) against the approval's policy.
func Allowed(a core.Approval, by string, groups []string) error {
	p := a.Policy
	if p.ExcludeRequester && by != "" && by == a.RequestedBy {
		return &NotAllowedError{ApprovalID: a.ID, By: by, Why: "the requester may not approve their own request"}
	}
	if len(p.Approvers) == 0 {
		return nil
	}
	for _, ap := range p.Approvers {
		if ap == by && by != "" || ap == Requester && by != "" && by == a.RequestedBy || slices.Contains(groups, ap) {
			return nil
		}
	}
	return &NotAllowedError{ApprovalID: a.ID, By: by, Why: "not in the tool's approvers"}
}

func (s *Service) expire(ctx context.Context, a core.Approval) (core.Approval, error) {
	d, err := s.cfg.Store.DecideApproval(ctx, a.ID, core.Decision{
		Status: core.ApprovalExpired, Via: ViaTimer, At: s.cfg.Clock.Now().UTC(),
		Reason: fmt.Sprintf("nobody decided within %s", a.ExpiresAt.Sub(a.CreatedAt).Round(time.Second)),
	})
	if err != nil {
		return d, err
	}
	s.decided(d)
	return d, nil
}

// ExpireDue expires every pending approval whose time is up and returns how
// many it expired. An approval decided meanwhile is left as decided.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	n := 0
	for {
		due, err := s.cfg.Store.DueApprovals(ctx, s.cfg.Clock.Now().UTC(), 100)
		if err != nil {
			return n, fmt.Errorf("due approvals: %w", err)
		}
		progressed := false
		for _, a := range due {
			_, err := s.expire(ctx, a)
			var np *core.NotPendingError
			switch {
			case err == nil:
				n++
				progressed = true
			case errors.As(err, &np):
				progressed = true
			default:
				return n, fmt.Errorf("expire approval %s: %w", a.ID, err)
			}
		}
		if len(due) < 100 || !progressed {
			return n, nil
		}
	}
}

// Start runs the expiry sweeper until ctx ends. The timers are the approval
// rows themselves, so expiries due while the gateway was down fire at start.
func (s *Service) Start(ctx context.Context) error {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		if _, err := s.ExpireDue(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("expire approvals", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
