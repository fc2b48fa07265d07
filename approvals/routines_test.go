package approval_test

import (
	"context"
	"errors"
	"testing"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
)

// TestMayTrigger: a routine's callers name who may trigger it on demand, in
// the same terms as a tool's approvers, plus the channels it may be run in.
func TestMayTrigger(t *testing.T) {
	_, svc := newService(t, approval.Person{Name: "ana", Slack: []string{"U_ANA"}, Keys: []string{"ana-laptop"}})
	slackIn := func(user, channel string) approval.Principal {
		p := approval.ChatPrincipal(approval.RouteSlack, "T1", user, "")
		p.Place = &approval.Place{Platform: approval.RouteSlack, Workspace: "T1", Channel: channel}
		p.MemberOf = func(_ context.Context, group string) (bool, error) { return group == "S_OPS" && user == "U_OPS", nil }
		return p
	}
	key := func(name string, role approval.Role, agents ...string) approval.Principal {
		return approval.KeyPrincipal(name, role, agents, approval.RouteAPI)
	}
	for _, c := range []struct {
		name    string
		callers []string
		p       approval.Principal
		allowed bool
	}{
		{"no callers: no chat user", nil, slackIn("U_X", "C_ANY"), false},
		{"no callers: any key", nil, key("ci", approval.RoleOperator), true},
		{"no user", nil, approval.Principal{Route: approval.RouteTelegram}, false},
		{"key limited to other agents", nil, key("ci", approval.RoleOperator, "billing"), false},
		{"person by name, from slack", []string{"ana"}, slackIn("U_ANA", "C_ANY"), true},
		{"person by name, from her key", []string{"ana"}, key("ana-laptop", approval.RoleOperator), true},
		{"person by name, someone else", []string{"ana"}, slackIn("U_X", "C_ANY"), false},
		{"channel", []string{"channel:slack:C_OPS"}, slackIn("U_X", "C_OPS"), true},
		{"channel of another platform", []string{"channel:discord:C_OPS"}, slackIn("U_X", "C_OPS"), false},
		{"other channel", []string{"channel:slack:C_OPS"}, slackIn("U_X", "C_DEV"), false},
		{"a key has no channel", []string{"channel:slack:C_OPS"}, key("ci", approval.RoleAdmin), false},
		{"user group", []string{"S_OPS"}, slackIn("U_OPS", "C_ANY"), true},
		{"not in the user group", []string{"S_OPS"}, slackIn("U_X", "C_ANY"), false},
		{"key role", []string{"role:operator"}, key("ci", approval.RoleOperator), true},
		{"key role too weak", []string{"role:approver"}, key("ci", approval.RoleOperator), false},
		{"key by name", []string{"key:ci"}, key("ci", approval.RoleOperator), true},
		{"admin is not a caller by role alone", []string{"ana"}, key("root", approval.RoleAdmin), false},
		{"requester names nobody", []string{approval.Requester}, slackIn("U_X", "C_ANY"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := svc.MayTrigger(t.Context(), core.Routine{ID: "deploy", AgentID: "ops", Callers: c.callers}, c.p)
			var nc *approval.NotCallerError
			switch {
			case c.allowed && err != nil:
				t.Errorf("refused: %v", err)
			case !c.allowed && !errors.As(err, &nc):
				t.Errorf("got %v, want a *NotCallerError", err)
			}
		})
	}
}
