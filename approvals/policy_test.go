package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/store/sqlite"
)

// route is one way to reach a decision: how it names its people and how a
// principal of it is built from what the route authenticates.
type route struct {
	name string
	// chat routes have a conversation (and the run was started there);
	// key routes (api, cli, mcp) do not.
	platform, workspace string
	// who builds the principal of user (a key name or a platform user id)
	// acting at place (channel, message); chat routes only use place.
	who func(user, channel, message string) approval.Principal
	// id is how the tool's approvers name user on this route.
	id func(user string) string
}

func keyRoute(name string) route {
	return route{name: name,
		who: func(user, _, _ string) approval.Principal {
			return approval.KeyPrincipal(user, approval.RoleApprover, nil, name)
		},
		id: func(user string) string { return "key:" + user },
	}
}

func chatRoute(platform, workspace string) route {
	return route{name: platform, platform: platform, workspace: workspace,
		who: func(user, channel, message string) approval.Principal {
			return chat.Clicker(&chat.Action{Platform: platform, Workspace: workspace, Channel: channel, MessageRef: message, UserID: user})
		},
		// A platform's raw user id, as the README's examples write them.
		id: func(user string) string { return user },
	}
}

var routes = []route{
	keyRoute(approval.RouteAPI), keyRoute(approval.RouteCLI), keyRoute(approval.RouteMCP),
	chatRoute(approval.RouteSlack, "T1"), chatRoute(approval.RouteDiscord, "G1"), chatRoute(approval.RouteTelegram, ""),
}

// The card of every chat route's approval is message m1 in channel c1.
const (
	cardChannel = "c1"
	cardMessage = "m1"
)

// TestOnePolicyEveryRoute decides the same request through every route and
// checks each case has the same outcome everywhere, the decider recorded is
// the principal, and every attempt leaves an audit entry.
func TestOnePolicyEveryRoute(t *testing.T) {
	type attempt struct {
		user             string
		channel, message string // where a chat click happened
		role             approval.Role
	}
	cases := []struct {
		name      string
		approvers func(r route) []string
		exclude   bool
		by        attempt
		allowed   bool
		keysOnly  bool // the case exists only for API keys
		chatOnly  bool // the case exists only for chat clicks
	}{
		{name: "approver listed", approvers: func(r route) []string { return []string{r.id("bob")} },
			by: attempt{user: "bob"}, allowed: true},
		{name: "not listed", approvers: func(r route) []string { return []string{r.id("bob")} },
			by: attempt{user: "eve"}},
		{name: "requester with exclude_requester", approvers: func(r route) []string { return []string{approval.Requester, r.id("bob")} },
			exclude: true, by: attempt{user: "ana"}},
		{name: "requester allowed without exclude_requester", approvers: func(r route) []string { return []string{approval.Requester} },
			by: attempt{user: "ana"}, allowed: true},
		{name: "viewer key", approvers: func(r route) []string { return []string{r.id("bob")} },
			by: attempt{user: "bob", role: approval.RoleViewer}, keysOnly: true},
		{name: "operator key", approvers: func(r route) []string { return []string{r.id("bob")} },
			by: attempt{user: "bob", role: approval.RoleOperator}, keysOnly: true},
		{name: "no role bypasses the approvers", approvers: func(r route) []string { return []string{r.id("bob")} },
			by: attempt{user: "root", role: approval.RoleAdmin}, keysOnly: true},
		{name: "click from another conversation", approvers: func(r route) []string { return []string{r.id("bob")} },
			by: attempt{user: "bob", channel: "c2", message: cardMessage}, chatOnly: true},
		{name: "click on another message", approvers: func(r route) []string { return []string{r.id("bob")} },
			by: attempt{user: "bob", channel: cardChannel, message: "m2"}, chatOnly: true},
		{name: "an empty approver names nobody", approvers: func(r route) []string { return []string{"", " "} },
			by: attempt{user: "eve"}},
		{name: "click without user", approvers: func(r route) []string { return nil },
			by: attempt{user: ""}},
		{name: "default policy: the conversation's member or an approver key", approvers: func(r route) []string { return nil },
			by: attempt{user: "carol"}, allowed: true},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			db, aps := newService(t)
			for _, tc := range cases {
				isKey := r.platform == ""
				if tc.keysOnly && !isKey || tc.chatOnly && isKey {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					a := pending(t, db, r, core.ApprovalPolicy{Approvers: tc.approvers(r), ExcludeRequester: tc.exclude})
					ch, msg := tc.by.channel, tc.by.message
					if ch == "" {
						ch, msg = cardChannel, cardMessage
					}
					p := r.who(tc.by.user, ch, msg)
					if tc.by.role != approval.RoleNone {
						p.Role = tc.by.role
					}
					got, err := aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: p, ArgsSHA256: a.ArgsSHA256})
					var na *approval.NotAllowedError
					switch {
					case tc.allowed && err != nil:
						t.Fatalf("%s: refused: %v", p.ID, err)
					case tc.allowed && (got.DecidedBy != p.ID || got.DecidedVia != r.name):
						t.Fatalf("decided by %q via %q, want the principal %q via %s", got.DecidedBy, got.DecidedVia, p.ID, r.name)
					case !tc.allowed && !errors.As(err, &na):
						t.Fatalf("%q: err = %v, want refused", p.ID, err)
					}
					if now, _ := db.GetApproval(t.Context(), a.ID); !tc.allowed && now.Status != core.ApprovalPending {
						t.Fatalf("refused decision changed the approval: %s", now.Status)
					}
					log, err := db.ListAudit(t.Context(), core.AuditFilter{Target: a.ID})
					if err != nil {
						t.Fatal(err)
					}
					want := core.AuditApprove
					if !tc.allowed {
						want = core.AuditRefused
					}
					if len(log.Items) != 1 || log.Items[0].Action != want || log.Items[0].Principal != p.ID || log.Items[0].Route != r.name {
						t.Fatalf("audit = %+v, want one %s by %q via %s", log.Items, want, p.ID, r.name)
					}
				})
			}
		})
	}
}

// A key never decides a chat-started run's approval unless the tool names
// it, and a chat user never decides an API run's.
func TestDefaultPolicyStaysInItsConversation(t *testing.T) {
	db, aps := newService(t)
	slack := chatRoute(approval.RouteSlack, "T1")
	chatRun := pending(t, db, slack, core.ApprovalPolicy{})
	admin := approval.KeyPrincipal("root", approval.RoleAdmin, nil, approval.RouteAPI)
	var na *approval.NotAllowedError
	if _, err := aps.Decide(t.Context(), chatRun.ID, approval.Request{Approve: true, Principal: admin}); !errors.As(err, &na) {
		t.Fatalf("admin key on a Slack run's approval: err = %v, want refused", err)
	}
	apiRun := pending(t, db, keyRoute(approval.RouteAPI), core.ApprovalPolicy{})
	click := slack.who("carol", cardChannel, cardMessage)
	if _, err := aps.Decide(t.Context(), apiRun.ID, approval.Request{Approve: true, Principal: click}); !errors.As(err, &na) {
		t.Fatalf("a Slack click on an API run's approval: err = %v, want refused", err)
	}
	named := pending(t, db, slack, core.ApprovalPolicy{Approvers: []string{"role:admin"}})
	if _, err := aps.Decide(t.Context(), named.ID, approval.Request{Approve: true, Principal: admin}); err != nil {
		t.Fatalf("admin key named by role:admin: %v", err)
	}
}

// People link one person's ids: exclude_requester holds across them, and a
// person named in approvers decides from any of their ids.
func TestPeopleLinkIDs(t *testing.T) {
	db, aps := newService(t, approval.Person{Name: "ana", Slack: []string{"ana"}, Keys: []string{"ana-laptop"}},
		approval.Person{Name: "bob", Telegram: []string{"bob"}})
	slack := chatRoute(approval.RouteSlack, "T1")
	a := pending(t, db, slack, core.ApprovalPolicy{Approvers: []string{"ana", "role:approver"}, ExcludeRequester: true})
	laptop := approval.KeyPrincipal("ana-laptop", approval.RoleApprover, nil, approval.RouteCLI)
	var na *approval.NotAllowedError
	if _, err := aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: laptop}); !errors.As(err, &na) {
		t.Fatalf("the requester through her own key: err = %v, want refused", err)
	}
	tg := chatRoute(approval.RouteTelegram, "")
	b := pending(t, db, tg, core.ApprovalPolicy{Approvers: []string{"bob"}})
	d, err := aps.Decide(t.Context(), b.ID, approval.Request{Approve: true, Principal: tg.who("bob", cardChannel, cardMessage)})
	if err != nil || d.DecidedByName != "bob" {
		t.Fatalf("bob by name: %+v, %v", d, err)
	}
}

func newService(t *testing.T, people ...approval.Person) (*sqlite.DB, *approval.Service) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, approval.New(approval.Config{Store: db, Cards: db, People: approval.NewDirectory(people)})
}

// pending creates a run started by ana on route r (in conversation c1 on
// a chat route, its card posted as m1) paused on an approval under policy.
func pending(t *testing.T, db *sqlite.DB, r route, policy core.ApprovalPolicy) core.Approval {
	t.Helper()
	a := paused(t, db, r, policy)
	if r.platform != "" {
		postCard(t, db, r.platform, a.ID)(core.SendSent)
	}
	return a
}

// paused is pending before the card is posted.
func paused(t *testing.T, db *sqlite.DB, r route, policy core.ApprovalPolicy) core.Approval {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	requester := r.who("ana", cardChannel, cardMessage).ID
	run := core.Run{ID: core.NewID("run"), SessionID: core.NewID("ses"), AgentID: "ops", UserID: "ana", StartedBy: requester,
		Type: core.RunTypeAPI, Input: "deploy", CreatedAt: now}
	ses := core.Session{ID: run.SessionID}
	if r.platform != "" {
		run.Type = core.RunTypeChat
		ses.Binding = core.Binding{Platform: r.platform, Workspace: r.workspace, Channel: cardChannel, Thread: "t1"}
	}
	if _, err := db.CreateRun(ctx, core.NewRun{Session: ses, Run: run,
		Events: []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "deploy"})}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimRun(ctx, run.ID, "w", now, now.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"env":"prod"}`)
	a := core.Approval{ID: core.NewID("apr"), RunID: run.ID, SessionID: run.SessionID, ToolCallID: "call_1", Tool: "deploy",
		Arguments: args, ArgsSHA256: "h", Policy: policy, RequestedBy: requester, Status: core.ApprovalPending,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, err := db.PauseRun(ctx, run.ID, "w", a, nil); err != nil {
		t.Fatal(err)
	}
	return a
}

// postCard starts posting approval id's card (the outbox's intent) and
// returns the function that records the outcome.
func postCard(t *testing.T, db *sqlite.DB, platform, id string) func(state string) {
	t.Helper()
	key := core.CardKey(platform, id)
	if _, _, err := db.ClaimSend(context.Background(), key, time.Now()); err != nil {
		t.Fatal(err)
	}
	return func(state string) {
		if err := db.SetSendState(context.Background(), key, state, cardMessage, time.Now()); err != nil {
			t.Error(err)
		}
	}
}

// A click can arrive while the card's post is being recorded (the platform
// showed it, the outbox has not stored its ref yet): it waits for the ref
// instead of being refused. A card that never got posted refuses.
func TestClickWhileTheCardIsBeingRecorded(t *testing.T) {
	db, aps := newService(t)
	tg := chatRoute(approval.RouteTelegram, "")
	a := paused(t, db, tg, core.ApprovalPolicy{})
	posted := postCard(t, db, tg.platform, a.ID)
	go func() { time.Sleep(100 * time.Millisecond); posted(core.SendSent) }()
	if _, err := aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: tg.who("bob", cardChannel, cardMessage)}); err != nil {
		t.Fatalf("click while the card's ref was being recorded: %v", err)
	}

	b := paused(t, db, tg, core.ApprovalPolicy{})
	postCard(t, db, tg.platform, b.ID)(core.SendUncertain)
	var na *approval.NotAllowedError
	if _, err := aps.Decide(t.Context(), b.ID, approval.Request{Approve: true, Principal: tg.who("bob", cardChannel, cardMessage)}); !errors.As(err, &na) {
		t.Fatalf("click on a card whose post is uncertain: %v, want refused", err)
	}
}
