package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/core"
)

// NotCallerError: the principal may not trigger the routine (it is not
// among the routine's callers, or a key is limited to other agents).
type NotCallerError struct {
	RoutineID string
	By        string
	Why       string
}

func (e *NotCallerError) Error() string {
	return fmt.Sprintf("%s may not run routine %s: %s", e.By, e.RoutineID, e.Why)
}

// Triggerer reads and fires routines; *routine.Scheduler is one.
type Triggerer interface {
	Get(ctx context.Context, id string) (core.Routine, error)
	TriggerIn(ctx context.Context, m core.ManualFire) (core.Run, error)
}

// Trigger is the one way a person or key fires a routine on demand, on
// every route (REST, CLI, MCP, chat commands): p must pass MayTrigger, then
// the routine fires with extra appended to its input, its result going to
// conversation b as well when set. dedupeKey names a chat command or an
// API request's idempotency key: given again, it answers with the first
// run and a *core.DuplicateError (see routine.Scheduler.TriggerIn). The
// trigger is audited in the transaction that fires it; a refusal is
// audited too.
// Role checks (operator and up for keys) are the route's.
func (s *Service) Trigger(ctx context.Context, rr Triggerer, p Principal, id, extra string, b core.Binding, dedupeKey string) (core.Run, error) {
	r, err := rr.Get(ctx, id)
	if err != nil {
		return core.Run{}, err
	}
	if err := s.MayTrigger(ctx, r, p); err != nil {
		if nc, ok := errors.AsType[*NotCallerError](err); ok {
			s.audit(ctx, core.AuditEntry{Principal: p.ID, Route: p.Route, Action: core.AuditTrigger, Target: r.ID,
				Outcome: core.AuditDenied, Detail: nc.Why})
		}
		return core.Run{}, err
	}
	return rr.TriggerIn(ctx, core.ManualFire{RoutineID: r.ID, Extra: extra, UserID: p.ID, Binding: b, DedupeKey: dedupeKey,
		Audit: &core.AuditEntry{Principal: p.ID, Route: p.Route, Action: core.AuditTrigger, Target: r.ID}})
}

// MayTrigger says whether p may trigger routine r on demand
// (*NotCallerError when not). A key must be allowed r's agent. A routine
// without callers may be triggered by keys (their role is the route's
// check) and by no chat user: anyone who can write to the bot (any
// Telegram user, any member of a workspace) would otherwise run any
// agent's routine in a conversation of their own, and decide its
// approvals there. Otherwise p must match one entry: what a tool's
// approvers may name (a person, a platform id, key:<name>, role:<role>, a
// Slack user group or Discord role), or channel:<platform>:<id> for the
// conversation the command is given in.
func (s *Service) MayTrigger(ctx context.Context, r core.Routine, p Principal) error {
	refuse := func(why string) error {
		return &NotCallerError{RoutineID: r.ID, By: p.ID, Why: why}
	}
	if p.ID == "" {
		return refuse("the request carries no user")
	}
	if p.IsKey() && !p.MayUseAgent(r.AgentID) {
		return refuse("the key is limited to other agents than " + r.AgentID)
	}
	if len(r.Callers) == 0 {
		if p.IsKey() {
			return nil
		}
		return refuse("the routine names no callers, and only its callers may run it from chat (add callers: a person, a group, or channel:<platform>:<id>)")
	}
	for _, want := range r.Callers {
		if ch, ok := strings.CutPrefix(want, "channel:"); ok {
			platform, channel, _ := strings.Cut(ch, ":")
			if p.Place != nil && p.Place.Platform == platform && p.Place.Channel == channel && channel != "" {
				return nil
			}
			continue
		}
		if want == Requester {
			continue // names nobody here
		}
		ok, err := s.matches(ctx, p, want, "")
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return refuse("not among the routine's callers")
}
