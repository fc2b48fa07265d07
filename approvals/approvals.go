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
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tracing"
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

// Observer is told of each decision (Prometheus in production).
type Observer interface {
	ApprovalDecided(a core.Approval)
}

type nopObserver struct{}

func (nopObserver) ApprovalDecided(core.Approval) {}

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
	// People names principals and resolves approvers that name a person;
	// nil = nobody is linked.
	People *Directory
	// Cards reads where each approval's chat card was posted (the outbox,
	// core.CardKey): a click counts only from that message. nil = no chat
	// click is accepted.
	Cards interface {
		SendRef(ctx context.Context, key string) (state, ref string, err error)
	}
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

// Request is a human decision. Who decides is the authenticated
// principal; nothing in a request body names them.
type Request struct {
	Approve   bool
	Principal Principal
	Reason    string
	// ArgsSHA256 is the hash of the arguments the decider was shown; when set
	// it must match the approval's (a changed request cannot be approved by
	// an old button).
	ArgsSHA256 string
}

// Decide records a decision after the policy allowed it (see Check). The
// first decision wins; a later one, or one after the approval expired,
// returns *core.NotPendingError and changes nothing. A principal the policy
// refuses gets *NotAllowedError and the refusal is audited.
func (s *Service) Decide(ctx context.Context, id string, req Request) (core.Approval, error) {
	p := req.Principal
	a, err := s.cfg.Store.GetApproval(ctx, id)
	if err != nil {
		return a, err
	}
	if err := s.Authorize(ctx, a, p, req.Approve); err != nil {
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
	status := core.ApprovalDenied
	if req.Approve {
		status = core.ApprovalApproved
	}
	d, err := s.cfg.Store.DecideApproval(ctx, id, core.Decision{
		Status: status, By: p.ID, ByName: s.cfg.People.Display(p), Via: p.Route, Reason: req.Reason,
		ArgsSHA256: req.ArgsSHA256, At: now,
		Audit: &core.AuditEntry{Principal: p.ID, Route: p.Route, Action: decisionAction(req.Approve), Target: id, Detail: req.Reason},
	})
	if err != nil {
		return d, err
	}
	s.decided(d)
	return d, nil
}

// Authorize is Check for a decision principal p is making now (from a
// card, when p clicked one); a refusal is audited.
func (s *Service) Authorize(ctx context.Context, a core.Approval, p Principal, approve bool) error {
	err := s.Check(ctx, a, p, true)
	var na *NotAllowedError
	if errors.As(err, &na) {
		s.audit(ctx, core.AuditEntry{Principal: p.ID, Route: p.Route, Action: core.AuditRefused, Target: a.ID,
			Outcome: core.AuditDenied, Detail: decisionAction(approve) + ": " + na.Why})
	}
	return err
}

// decisionAction is the audit action of an approve or a deny.
func decisionAction(approve bool) string {
	if approve {
		return core.AuditApprove
	}
	return core.AuditDeny
}

// audit appends e; the log is best effort for refusals (a decision's entry
// commits with the decision).
func (s *Service) audit(ctx context.Context, e core.AuditEntry) {
	if e.At.IsZero() {
		e.At = s.cfg.Clock.Now().UTC()
	}
	if err := s.cfg.Store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.cfg.Logger.Error("audit log", "action", e.Action, "target", e.Target, "principal", e.Principal, "err", err)
	}
}

func (s *Service) decided(a core.Approval) {
	s.cfg.Observer.ApprovalDecided(a)
	if a.DecidedAt != nil {
		errMsg := ""
		if a.Status != core.ApprovalApproved {
			errMsg = string(a.Status)
		}
		tracing.Past(a.RunID, tracing.SpanApprovalWait, a.CreatedAt, *a.DecidedAt, errMsg,
			attribute.String("agentgate.approval.id", a.ID), attribute.String("agentgate.tool", a.Tool),
			attribute.String("agentgate.approval.status", string(a.Status)), attribute.String("agentgate.approval.via", a.DecidedVia))
	}
	if s.cfg.Hub != nil {
		s.cfg.Hub.Changed(a.RunID)
	}
	s.cfg.Logger.Info("approval decided", "approval", a.ID, "run", a.RunID, "tool", a.Tool,
		"status", a.Status, "by", a.DecidedBy, "via", a.DecidedVia)
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
