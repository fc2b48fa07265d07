package approval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Check is the one policy every route's decision goes through. It says
// whether principal p may decide approval a, and why not (*NotAllowedError):
//
//   - a principal without an id (a click without a user) decides nothing;
//   - an API key needs the approver or admin role, and the run's agent
//     among its agents;
//   - a chat click counts only from the approval's own card: its platform,
//     conversation and message (with card false, as when listing what a
//     person may decide, the conversation is not checked here);
//   - exclude_requester refuses whoever started the run, under any of the
//     ids the people directory links to them;
//   - when the tool names approvers, p must be one of them (a person, a
//     platform id, key:<name>, a Slack user group or Discord role it is in,
//     role:<role> for keys with at least that role, or requester); no role
//     bypasses the list;
//   - otherwise a run started in a chat conversation is decided there (from
//     its card), and a run started through the API, MCP or a schedule by
//     keys with the approver or admin role. Never anyone, anywhere.
func (s *Service) Check(ctx context.Context, a core.Approval, p Principal, card bool) error {
	refuse := func(format string, args ...any) error {
		return &NotAllowedError{ApprovalID: a.ID, By: cmp.Or(p.ID, "an unidentified user"), Why: fmt.Sprintf(format, args...)}
	}
	if p.ID == "" {
		return refuse("the request carries no user")
	}
	run, err := s.cfg.Store.GetRun(ctx, a.RunID)
	if err != nil {
		return fmt.Errorf("approval %s: load run: %w", a.ID, err)
	}
	sess, err := s.cfg.Store.GetSession(ctx, run.SessionID)
	if err != nil {
		return fmt.Errorf("approval %s: load session: %w", a.ID, err)
	}
	if p.IsKey() {
		if p.Role < RoleApprover {
			return refuse("the key's role %s may not decide approvals (approver or admin may)", p.Role)
		}
		if !p.MayUseAgent(run.AgentID) {
			return refuse("the key is limited to other agents than %s", run.AgentID)
		}
	}
	if p.Place != nil && card {
		if err := s.fromCard(ctx, a, sess.Binding, *p.Place); err != nil {
			var na *NotAllowedError
			if errors.As(err, &na) {
				na.By = p.ID
			}
			return err
		}
	}
	requester := a.RequestedBy
	if a.Policy.ExcludeRequester && s.cfg.People.Same(p.ID, requester) {
		return refuse("the requester may not approve their own request")
	}
	if len(a.Policy.Approvers) > 0 {
		for _, want := range a.Policy.Approvers {
			ok, err := s.matches(ctx, p, want, requester)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
		}
		return refuse("not in the tool's approvers")
	}
	chatRun := sess.Binding.Platform != "" && run.Type != core.RunTypeExternal
	switch {
	case p.IsKey() && chatRun:
		return refuse("a request asked in a %s conversation is decided there, from its card (or name role:%s in the tool's approvers)", sess.Binding.Platform, p.Role)
	case p.IsKey():
		return nil // role checked above
	case p.Place == nil || sess.Binding.Platform == "" || p.Place.Platform != sess.Binding.Platform:
		return refuse("only the conversation the request was asked in may decide it")
	case !card && p.Place.Channel != sess.Binding.Channel:
		return refuse("only the conversation the request was asked in may decide it")
	}
	return nil
}

// fromCard checks that a click at place was on approval a's own card.
func (s *Service) fromCard(ctx context.Context, a core.Approval, b core.Binding, place Place) error {
	refuse := &NotAllowedError{ApprovalID: a.ID, Why: "the click did not come from this request's card in its conversation"}
	if b.Platform == "" || place.Platform != b.Platform || place.Channel == "" || place.Message == "" {
		return refuse
	}
	if b.Workspace != "" && place.Workspace != "" && place.Workspace != b.Workspace {
		return refuse
	}
	if s.cfg.Cards == nil {
		return refuse
	}
	state, ref, err := s.cardRef(ctx, core.CardKey(b.Platform, a.ID))
	switch {
	case errors.Is(err, core.ErrNotFound):
		return refuse
	case err != nil:
		return fmt.Errorf("approval %s: read its card: %w", a.ID, err)
	case state != core.SendSent || ref != place.Message:
		return refuse
	}
	// Message refs are unique per channel only (Slack ts, Telegram
	// message_id); the card lives in the session's channel.
	if place.Channel != b.Channel {
		return refuse
	}
	return nil
}

// cardSettle is how long a click waits for its card's ref while the post
// is being recorded: the platform shows a card before its answer reaches
// the gateway and is stored.
const cardSettle = 3 * time.Second

// cardRef reads the outbox entry of a card, waiting up to cardSettle
// while it is still SendSending.
func (s *Service) cardRef(ctx context.Context, key string) (state, ref string, err error) {
	deadline := time.Now().Add(cardSettle)
	for {
		state, ref, err = s.cfg.Cards.SendRef(ctx, key)
		if err != nil || state != core.SendSending || time.Now().After(deadline) {
			return state, ref, err
		}
		select {
		case <-ctx.Done():
			return state, ref, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// matches reports whether one entry of a tool's approvers names p.
func (s *Service) matches(ctx context.Context, p Principal, want, requester string) (bool, error) {
	switch want = strings.TrimSpace(want); {
	case want == "":
		// Names nobody (approvers: ["${UNSET}"]); the config refuses it,
		// but never let it match the unlinked, whose person is "".
		return false, nil
	case want == Requester:
		return s.cfg.People.Same(p.ID, requester), nil
	case strings.HasPrefix(want, "role:"):
		r, err := ParseRole(strings.TrimPrefix(want, "role:"))
		return err == nil && p.IsKey() && p.Role >= r, nil
	case want == p.ID:
		return true, nil
	case strings.Contains(want, ":"):
		// slack:U123 names that user in any workspace.
		if user, ok := strings.CutPrefix(want, "slack:"); ok && !strings.Contains(user, "/") {
			return p.Route == RouteSlack && p.User == user, nil
		}
		return false, nil
	case s.cfg.People.Person(p.ID) == want:
		return true, nil
	case !p.IsKey() && p.User == want:
		return true, nil
	case p.IsKey():
		return false, nil
	}
	for _, g := range p.Groups {
		if g == want {
			return true, nil
		}
	}
	if p.MemberOf != nil {
		ok, err := p.MemberOf(ctx, want)
		if err != nil {
			return false, fmt.Errorf("is %s in group %s: %w", p.ID, want, err)
		}
		return ok, nil
	}
	return false, nil
}
