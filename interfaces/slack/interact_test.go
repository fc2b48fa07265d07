package slack_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/slack"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
	"github.com/agentgate/agentgate/store/sqlite"
)

// Approval cards, clicks and slash commands, on a real store against the
// fake Slack.

const (
	team         = "T1"
	cardChannel  = "C0DEPLOYS1"
	cardThread   = "1700000100.000100"
	otherChannel = "C0RANDOM01"
	ana          = "U0ANA00001"
	bob          = "U0BOB00001"
)

// principal is the principal id of Slack user user of the team:
// slack:<team>/<user>, as decided_by and requested_by record it.
func principal(user string) string {
	return approval.ChatPrincipal(chat.PlatformSlack, team, user, "").ID
}

type approvalsEnv struct {
	db       *sqlite.DB
	fake     *slacktest.Server
	client   *slack.Client
	notifier *slack.Notifier
	router   *chat.Approvals
	aps      *approval.Service
	h        *slack.Handler
	routines *fakeRoutines
}

type nopSubmitter struct{}

func (nopSubmitter) Submit(context.Context, core.SubmitRequest) (core.Run, error) {
	return core.Run{}, fmt.Errorf("not in this test")
}

func newApprovalsEnv(t *testing.T) *approvalsEnv {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &approvalsEnv{db: db, fake: slacktest.New(t), routines: &fakeRoutines{audit: db}}
	e.fake.UserGroup("S0ONCALL01", ana)
	if e.client, err = slack.NewClient(slack.ClientConfig{Token: e.fake.Token, APIURL: e.fake.URL, ChannelInterval: -1}); err != nil {
		t.Fatal(err)
	}
	if e.notifier, err = slack.NewNotifier(chat.NotifierConfig[*slack.Client]{Outbox: db, Client: e.client, Logger: log}); err != nil {
		t.Fatal(err)
	}
	e.router = &chat.Approvals{Store: db, Renderers: map[string]chat.ApprovalRenderer{chat.PlatformSlack: e.notifier}}
	// Cards: a click counts only from the card the notifier posted (outbox).
	e.aps = approval.New(approval.Config{Store: db, Logger: log, Cards: db})
	e.h, err = slack.NewHandler(slack.HandlerConfig{
		Threads:       chat.Threads{Sessions: db},
		Intake:        chat.Intake{Engine: nopSubmitter{}, Inbox: db, Logger: log, DefaultAgent: "ops"},
		SigningSecret: secret,
		Parser:        slack.Parser{BotUserID: slacktest.DefaultUserID, BotID: slacktest.DefaultBotID},
		Interact:      slack.InteractConfig{Approvals: e.aps, Store: db, Client: e.client, Routines: e.routines},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// pause creates a Slack run of bob's in the thread and pauses it for a
// deploy approval under policy; bob's principal is the requester, as the
// engine records it for a run started in Slack.
func (e *approvalsEnv) pause(t *testing.T, policy core.ApprovalPolicy) core.Approval {
	t.Helper()
	return e.pauseArgs(t, policy, `{"service":"web","env":"production"}`)
}

// pauseArgs is pause, for a call with args.
func (e *approvalsEnv) pauseArgs(t *testing.T, policy core.ApprovalPolicy, args string) core.Approval {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	sid := "ops:slack:" + team + ":" + cardChannel + ":" + cardThread + ":" + core.NewID("s")
	run, err := e.db.CreateRun(ctx, core.NewRun{
		Session: core.Session{ID: sid, Binding: core.Binding{Platform: chat.PlatformSlack, Workspace: team, Channel: cardChannel, Thread: cardThread}},
		Run:     core.Run{ID: core.NewID("run"), AgentID: "ops", UserID: bob, StartedBy: principal(bob), Type: core.RunTypeChat, Input: "deploy web"},
		Events:  []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "deploy web", UserID: bob})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ClaimRun(ctx, run.ID, "w", now, now.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	a := core.Approval{ID: core.NewID("apr"), RunID: run.ID, ToolCallID: "call_1", Tool: "deploy",
		Arguments: json.RawMessage(args), Policy: policy, RequestedBy: principal(bob),
		CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute)}
	if _, err := e.db.PauseRun(ctx, run.ID, "w", a, nil); err != nil {
		t.Fatal(err)
	}
	got, err := e.db.GetApproval(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// render runs the approval job for a's current state, as the engine would.
func (e *approvalsEnv) render(t *testing.T, id string) {
	t.Helper()
	a, err := e.db.GetApproval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.router.Handle(t.Context(), core.ApprovalJobFor(id, a.Status)); err != nil {
		t.Fatalf("render approval %s (%s): %v", id, a.Status, err)
	}
}

// cards returns the bot's approval cards in the thread.
func (e *approvalsEnv) cards() []slacktest.Message {
	var out []slacktest.Message
	for _, m := range e.fake.Replies(cardChannel, cardThread) {
		if strings.Contains(string(m.Blocks), "approval_summary") {
			out = append(out, m)
		}
	}
	return out
}

func hasButtons(m slacktest.Message) bool {
	return strings.Contains(string(m.Blocks), `"approval_actions"`)
}

func (e *approvalsEnv) send(t *testing.T, body []byte) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, slacktest.SignedRequest(secret, body, time.Now()))
	return rec.Code, rec.Body.String()
}

// cardTS is the ts of approval id's card: the message the outbox recorded
// as sent, which the fake holds in the thread.
func (e *approvalsEnv) cardTS(t *testing.T, id string) string {
	t.Helper()
	state, ts, err := e.db.SendRef(t.Context(), core.CardKey(chat.PlatformSlack, id))
	if err != nil || state != core.SendSent {
		t.Fatalf("card of %s: state %q, %v; want sent (render it first)", id, state, err)
	}
	if m, ok := e.fake.Message(cardChannel, ts); !ok || m.ThreadTS != cardThread {
		t.Fatalf("card of %s: no message %s in the thread of %s", id, ts, cardChannel)
	}
	return ts
}

// click clicks action on approval id's card (which must have been posted).
func (e *approvalsEnv) click(t *testing.T, user, action, approvalID string) {
	t.Helper()
	e.clickAt(t, user, action, approvalID, cardChannel, cardThread, e.cardTS(t, approvalID))
}

// clickAt clicks action with approval id's value on message ts of channel
// (in thread), wherever that is.
func (e *approvalsEnv) clickAt(t *testing.T, user, action, approvalID, channel, thread, ts string) {
	t.Helper()
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": "A1", "token": "x",
		"user":       map[string]any{"id": user, "team_id": team},
		"team":       map[string]any{"id": team},
		"container":  map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "thread_ts": thread},
		"channel":    map[string]any{"id": channel},
		"trigger_id": "1337." + user + "." + core.NewID("t"), "response_url": "http://127.0.0.1:1/r",
		"actions": []map[string]any{{"action_id": action, "block_id": "approval_actions", "type": "button", "value": approvalID, "action_ts": "1700000102.000100"}},
	})
	if code, body := e.send(t, []byte("payload="+url.QueryEscape(string(p)))); code != http.StatusOK {
		t.Fatalf("click: %d %s", code, body)
	}
}

// told waits for an ephemeral message to user in the card's thread
// containing want.
func (e *approvalsEnv) told(t *testing.T, user, want string) {
	t.Helper()
	e.toldIn(t, user, cardChannel, cardThread, want)
}

// toldIn waits for an ephemeral message to user containing want, and checks
// it went to channel's thread (where the click was).
func (e *approvalsEnv) toldIn(t *testing.T, user, channel, thread, want string) {
	t.Helper()
	e.toldAfter(t, 0, user, channel, thread, want)
}

// toldAfter is toldIn among the ephemerals after the first mark.
func (e *approvalsEnv) toldAfter(t *testing.T, mark int, user, channel, thread, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all := e.fake.Ephemerals()
		for _, m := range all[min(mark, len(all)):] {
			if m.User == user && strings.Contains(m.Text, want) {
				if m.Channel != channel || m.ThreadTS != thread {
					t.Errorf("ephemeral %q went to %s/%s, want %s/%s", m.Text, m.Channel, m.ThreadTS, channel, thread)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ephemeral to %s containing %q; got %+v", user, want, e.fake.Ephemerals())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *approvalsEnv) status(t *testing.T, id string) core.Approval {
	t.Helper()
	a, err := e.db.GetApproval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestApprovalCardFollowsDecision(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{ana, "role:admin"}})
	e.render(t, a.ID)
	e.render(t, a.ID) // a retried job posts no second card
	cards := e.cards()
	if len(cards) != 1 || !hasButtons(cards[0]) {
		t.Fatalf("cards = %+v, want one with buttons", cards)
	}
	if !strings.Contains(string(cards[0].Blocks), "Who may approve: \\u003c@"+ana+"\\u003e, role:admin") {
		t.Errorf("card does not say who may approve: %s", cards[0].Blocks)
	}
	if !strings.Contains(string(cards[0].Blocks), "(requested by \\u003c@"+bob+"\\u003e)") {
		t.Errorf("card does not mention the requester: %s", cards[0].Blocks)
	}
	// A key below the role the approvers name decides nothing.
	var na *approval.NotAllowedError
	if _, err := e.aps.Decide(t.Context(), a.ID, approval.Request{Principal: approval.KeyPrincipal("ops-key", approval.RoleApprover, nil, approval.RouteAPI)}); !errors.As(err, &na) {
		t.Fatalf("an approver key not in the approvers decided: %v", err)
	}
	// Decided through the API by a key the approvers name (role:admin): the
	// card shows it, without buttons.
	if _, err := e.aps.Decide(t.Context(), a.ID, approval.Request{Approve: false, Principal: approval.KeyPrincipal("ci-key", approval.RoleAdmin, nil, approval.RouteAPI), Reason: "freeze"}); err != nil {
		t.Fatal(err)
	}
	e.render(t, a.ID)
	cards = e.cards()
	if len(cards) != 1 || hasButtons(cards[0]) || !strings.Contains(string(cards[0].Blocks), "Denied by ci-key (API key): freeze") {
		t.Fatalf("after the decision: %+v", cards)
	}
}

// The decision's job may run before the card was ever posted: the card
// appears already decided, and the late "pending" job changes nothing.
func TestApprovalDecidedBeforeCardPosted(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{"key:ci-key"}})
	if _, err := e.aps.Decide(t.Context(), a.ID, approval.Request{Approve: true, Principal: approval.KeyPrincipal("ci-key", approval.RoleApprover, nil, approval.RouteAPI)}); err != nil {
		t.Fatal(err)
	}
	e.render(t, a.ID)
	if err := e.router.Handle(t.Context(), core.ApprovalJobFor(a.ID, core.ApprovalPending)); err != nil {
		t.Fatal(err)
	}
	cards := e.cards()
	if len(cards) != 1 || hasButtons(cards[0]) || !strings.Contains(string(cards[0].Blocks), "Approved by ci-key (API key)") {
		t.Fatalf("cards = %+v, want one, approved, without buttons", cards)
	}
}

// A card whose post failed in a way that may have posted it is never posted
// again; one Slack refused is posted by the retry.
func TestApprovalCardNeverPostedTwice(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	a := e.pause(t, core.ApprovalPolicy{})
	e.fake.ServerError("chat.postMessage", http.StatusInternalServerError, 1)
	e.render(t, a.ID) // outcome unknown: recorded, not retried
	e.render(t, a.ID)
	if n := len(e.fake.Calls("chat.postMessage")); n != 1 {
		t.Fatalf("%d chat.postMessage calls after an unknown outcome, want 1", n)
	}

	b := e.pause(t, core.ApprovalPolicy{})
	e.fake.Error("chat.postMessage", "channel_not_found", 1)
	if err := e.router.Handle(t.Context(), core.ApprovalJobFor(b.ID, core.ApprovalPending)); err == nil {
		t.Fatal("a refused post reported success; the job would not be retried")
	}
	e.render(t, b.ID)
	found := 0
	for _, c := range e.cards() {
		if strings.Contains(string(c.Blocks), b.ID) {
			found++
		}
	}
	if found != 1 {
		t.Fatalf("card of %s posted %d times after a refusal and a retry, want 1", b.ID, found)
	}
}

func TestClickByApproverDecides(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{ana}})
	e.render(t, a.ID)
	e.click(t, ana, chat.ActionApprove, a.ID)
	got := e.status(t, a.ID)
	if got.Status != core.ApprovalApproved || got.DecidedBy != principal(ana) || got.DecidedVia != chat.PlatformSlack {
		t.Fatalf("approval after ana's click = %s by %s via %s, want approved by %s via slack", got.Status, got.DecidedBy, got.DecidedVia, principal(ana))
	}
	e.render(t, a.ID)
	if cards := e.cards(); len(cards) != 1 || hasButtons(cards[0]) || !strings.Contains(string(cards[0].Blocks), "Approved by \\u003c@"+ana+"\\u003e") {
		t.Fatalf("card after ana's click = %+v, want approved by a mention of her, without buttons", cards)
	}
	e.click(t, ana, chat.ActionDeny, a.ID) // a second click changes nothing
	e.told(t, ana, "already approved by <@"+ana+">")
	if got := e.status(t, a.ID); got.Status != core.ApprovalApproved {
		t.Fatalf("second click changed the decision to %s", got.Status)
	}
}

func TestClickByNonApproverRefused(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	for _, tc := range []struct {
		name   string
		policy core.ApprovalPolicy
		user   string
		want   string
	}{
		{"not listed", core.ApprovalPolicy{Approvers: []string{ana}}, bob, "not in the tool's approvers"},
		{"not in the group", core.ApprovalPolicy{Approvers: []string{"S0ONCALL01"}}, bob, "not in the tool's approvers"},
		{"a key's role", core.ApprovalPolicy{Approvers: []string{"role:admin"}}, ana, "not in the tool's approvers"},
		{"own request", core.ApprovalPolicy{ExcludeRequester: true}, bob, "may not approve their own request"},
	} {
		a := e.pause(t, tc.policy)
		e.render(t, a.ID)
		e.click(t, tc.user, chat.ActionApprove, a.ID)
		e.told(t, tc.user, tc.want)
		if got := e.status(t, a.ID); got.Status != core.ApprovalPending {
			t.Errorf("%s: approval %s after a refused click, want pending", tc.name, got.Status)
		}
	}
	// A member of the approving user group may decide.
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{"S0ONCALL01"}})
	e.render(t, a.ID)
	e.click(t, ana, chat.ActionApprove, a.ID)
	if got := e.status(t, a.ID); got.Status != core.ApprovalApproved || got.DecidedBy != principal(ana) {
		t.Errorf("group member's click: approval %s by %s, want approved by %s", got.Status, got.DecidedBy, principal(ana))
	}
}

// A click counts only from the approval's own card: the same button value
// before the card was posted, on another message of the card's thread or on
// the card's ts in another channel is refused, even for an approver; from
// the card it decides.
func TestClickOffTheCardRefused(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	const offCard = "the click did not come from this request's card in its conversation"
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{ana}})
	refused := func(name, channel, thread, ts string) {
		t.Helper()
		mark := len(e.fake.Ephemerals())
		e.clickAt(t, ana, chat.ActionApprove, a.ID, channel, thread, ts)
		e.toldAfter(t, mark, ana, channel, thread, offCard)
		if got := e.status(t, a.ID); got.Status != core.ApprovalPending {
			t.Fatalf("%s: approval %s after an off-card click, want pending", name, got.Status)
		}
	}
	refused("before the card was posted", cardChannel, cardThread, "1700000101.000100")
	e.render(t, a.ID)
	ts := e.cardTS(t, a.ID)
	refused("another message in the thread", cardChannel, cardThread, "1700000101.000100")
	refused("another channel", otherChannel, "", ts)
	e.click(t, ana, chat.ActionApprove, a.ID)
	if got := e.status(t, a.ID); got.Status != core.ApprovalApproved {
		t.Fatalf("ana's click on the card: approval %s, want approved", got.Status)
	}
}

// Deny opens a modal asking for a reason; its submission denies with it.
func TestDenyAsksForReason(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{ana}})
	e.render(t, a.ID)
	e.click(t, ana, chat.ActionDeny, a.ID)
	views := e.fake.Views()
	if len(views) != 1 {
		t.Fatalf("views opened = %d, want the deny modal", len(views))
	}
	if got := e.status(t, a.ID); got.Status != core.ApprovalPending {
		t.Fatalf("approval %s before the modal was submitted, want pending", got.Status)
	}
	var view struct {
		CallbackID      string          `json:"callback_id"`
		PrivateMetadata string          `json:"private_metadata"`
		Blocks          json.RawMessage `json:"blocks"`
	}
	if err := json.Unmarshal(views[0].View, &view); err != nil {
		t.Fatal(err)
	}
	// The submission counts as a click on the card: the modal remembers it.
	var meta struct{ Channel, Message string }
	if err := json.Unmarshal([]byte(view.PrivateMetadata), &meta); err != nil || meta.Channel != cardChannel || meta.Message != e.cardTS(t, a.ID) {
		t.Fatalf("deny modal's private_metadata = %s (%v), want the card's channel %s and ts %s", view.PrivateMetadata, err, cardChannel, e.cardTS(t, a.ID))
	}
	sub, _ := json.Marshal(map[string]any{
		"type": "view_submission", "team": map[string]any{"id": team}, "user": map[string]any{"id": ana},
		"view": map[string]any{"id": "V0001", "hash": "h1", "type": "modal", "callback_id": view.CallbackID,
			"private_metadata": view.PrivateMetadata,
			"state": map[string]any{"values": map[string]any{"reason": map[string]any{"reason": map[string]any{
				"type": "plain_text_input", "value": "  not during the freeze  "}}}}},
	})
	if code, body := e.send(t, []byte("payload="+url.QueryEscape(string(sub)))); code != http.StatusOK || body != "" {
		t.Fatalf("view_submission answer: %d %q, want an empty 200 (closes the modal)", code, body)
	}
	got := e.status(t, a.ID)
	if got.Status != core.ApprovalDenied || got.Reason != "not during the freeze" || got.DecidedBy != principal(ana) {
		t.Fatalf("approval after the modal: %s by %s, reason %q", got.Status, got.DecidedBy, got.Reason)
	}
}

// workflowCall is a GitHub MCP create_or_update_file call whose content is
// longer than a card shows: sorted after it, owner, path and repo would be
// cut off the card.
var workflowCall = `{"branch":"main","content":"` + strings.Repeat(`on: push\n`, 500) +
	`","message":"ci: add workflow","owner":"victim","path":".github/workflows/x.yml","repo":"infra"}`

// A card that cannot show its arguments in full offers Deny alone and says
// where to approve; an Approve click on it all the same (an old card, a
// forged click) is refused with that note and changes nothing; Deny works.
func TestApproveRefusedWhenArgumentsCut(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	a := e.pauseArgs(t, core.ApprovalPolicy{Approvers: []string{ana}}, workflowCall)
	e.render(t, a.ID)
	cards := e.cards()
	if len(cards) != 1 {
		t.Fatalf("cards = %+v, want one", cards)
	}
	blocks := string(cards[0].Blocks)
	note := "of 5,149 characters shown. Approve only where they show in full: agentgate approvals list, or GET /api/v1/approvals/" + a.ID
	if !strings.Contains(blocks, note) || strings.Contains(blocks, `"action_id":"approve"`) || !strings.Contains(blocks, `"action_id":"deny"`) {
		t.Fatalf("card = %s, want the note %q and Deny alone", blocks, note)
	}

	e.click(t, ana, chat.ActionApprove, a.ID)
	e.told(t, ana, "Arguments cut: ")
	e.told(t, ana, note)
	if got := e.status(t, a.ID); got.Status != core.ApprovalPending {
		t.Fatalf("approval %s after Approve on a card of cut arguments, want pending", got.Status)
	}

	e.click(t, ana, chat.ActionDeny, a.ID)
	views := e.fake.Views()
	if len(views) != 1 {
		t.Fatalf("views opened = %d, want the deny modal", len(views))
	}
	var view struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
	}
	if err := json.Unmarshal(views[0].View, &view); err != nil {
		t.Fatal(err)
	}
	sub, _ := json.Marshal(map[string]any{
		"type": "view_submission", "team": map[string]any{"id": team}, "user": map[string]any{"id": ana},
		"view": map[string]any{"id": "V0001", "hash": "h1", "type": "modal", "callback_id": view.CallbackID, "private_metadata": view.PrivateMetadata},
	})
	if code, body := e.send(t, []byte("payload="+url.QueryEscape(string(sub)))); code != http.StatusOK {
		t.Fatalf("view_submission answer: %d %q", code, body)
	}
	if got := e.status(t, a.ID); got.Status != core.ApprovalDenied || got.DecidedBy != principal(ana) {
		t.Fatalf("approval after Deny = %s by %s, want denied by %s", got.Status, got.DecidedBy, principal(ana))
	}
}

type fakeRoutines struct {
	triggered []string
	fired     map[string]bool // dedupe keys fired, as the routine store's inbox keeps them
	audit     core.AuditLog   // records a trigger's audit entry, as the routine store does
}

func (f *fakeRoutines) List(context.Context, core.RoutineFilter) (core.Page[core.Routine], error) {
	next := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	return core.Page[core.Routine]{Items: []core.Routine{
		{ID: "daily-digest", AgentID: "ops", Schedule: "0 9 * * 1-5", Enabled: true, NextFireAt: &next, Callers: []string{"channel:slack:C0DEPLOYS1"}},
		{ID: "cost-check", AgentID: "ops", Schedule: "@daily"},
		{ID: "deploy-prod", AgentID: "ops", Schedule: "@daily", Callers: []string{"channel:slack:C_OPS", "S0ONCALL01"}},
	}}, nil
}

func (f *fakeRoutines) Get(ctx context.Context, id string) (core.Routine, error) {
	page, _ := f.List(ctx, core.RoutineFilter{})
	for _, r := range page.Items {
		if r.ID == id {
			return r, nil
		}
	}
	return core.Routine{}, fmt.Errorf("routine %s: %w", id, core.ErrNotFound)
}

func (f *fakeRoutines) TriggerIn(ctx context.Context, m core.ManualFire) (core.Run, error) {
	id, extra, user, b := m.RoutineID, m.Extra, m.UserID, m.Binding
	if _, err := f.Get(ctx, id); err != nil {
		return core.Run{}, err
	}
	if m.DedupeKey != "" && f.fired[m.DedupeKey] { // as routine.Scheduler.TriggerIn answers a redelivery
		return core.Run{ID: "run_digest1"}, &core.DuplicateError{Platform: b.Platform, Key: m.DedupeKey, RunID: "run_digest1"}
	}
	if f.fired == nil {
		f.fired = map[string]bool{}
	}
	f.fired[m.DedupeKey] = true
	f.triggered = append(f.triggered, fmt.Sprintf("%s|%s|%s|%s:%s", id, extra, user, b.Platform, b.Channel))
	if m.Audit != nil {
		if err := f.audit.AppendAudit(ctx, *m.Audit); err != nil {
			return core.Run{}, err
		}
	}
	return core.Run{ID: "run_digest1"}, nil
}

func TestSlashCommand(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{ana}})
	e.pause(t, core.ApprovalPolicy{Approvers: []string{bob + "X"}}) // nobody here may decide it
	trigger := ""                                                   // a command's trigger_id; a new one for each when ""
	command := func(user, channel, text string) slack.CommandReply {
		t.Helper()
		f := url.Values{"team_id": {team}, "channel_id": {channel}, "user_id": {user}, "user_name": {"x"},
			"command": {"/agentgate"}, "text": {text}, "trigger_id": {cmp.Or(trigger, "t."+core.NewID("t"))}, "response_url": {"http://127.0.0.1:1/c"}}
		code, body := e.send(t, []byte(f.Encode()))
		var r slack.CommandReply
		if err := json.Unmarshal([]byte(body), &r); code != http.StatusOK || err != nil || r.ResponseType != "ephemeral" {
			t.Fatalf("/agentgate %s: %d %s, want an ephemeral answer", text, code, body)
		}
		return r
	}
	for _, tc := range []struct{ user, channel, text, want string }{
		{bob, cardChannel, "", "/agentgate run <routine>"},
		{bob, cardChannel, "help", "/agentgate approvals"},
		{bob, cardChannel, "routines", "`daily-digest` (on)"},
		{bob, cardChannel, "run daily-digest only prod", "Started routine `daily-digest`"},
		{bob, cardChannel, "run nope", "There is no routine `nope`"},
		// deploy-prod's callers: the channel C_OPS and the user group S0ONCALL01 (ana).
		{bob, cardChannel, "run deploy-prod", "You may not run routine `deploy-prod`: not among the routine's callers"},
		{ana, cardChannel, "run deploy-prod", "Started routine `deploy-prod`"},
		{bob, "C_OPS", "run deploy-prod", "Started routine `deploy-prod`"},
		{bob, cardChannel, "run", "Name the routine"},
		{ana, cardChannel, "approvals", "(1)*\n• run `" + a.RunID + "` wants to run `deploy` (approval `" + a.ID + "`"},
		{bob, cardChannel, "approvals", "Nothing is waiting for your decision"},  // not an approver
		{ana, otherChannel, "approvals", "Nothing is waiting for your decision"}, // not this channel's
		{bob, cardChannel, "dance", "Unknown command `dance`"},
	} {
		if got := command(tc.user, tc.channel, tc.text); !strings.Contains(got.Text, tc.want) {
			t.Errorf("/agentgate %s by %s in %s = %q, want it to contain %q", tc.text, tc.user, tc.channel, got.Text, tc.want)
		}
	}
	// A command delivered again (Socket Mode redelivers what it saw no
	// acknowledgement for) answers as the first did and fires nothing more.
	trigger = "t.redelivered"
	for range 2 {
		if got := command(bob, cardChannel, "run daily-digest again").Text; !strings.Contains(got, "Started routine `daily-digest` (run `run_digest1`)") {
			t.Errorf("/agentgate run daily-digest again, delivered twice = %q, want the run it started", got)
		}
	}
	trigger = ""
	// The routines list offers deploy-prod only where its callers allow.
	if got := command(bob, cardChannel, "routines").Text; strings.Contains(got, "deploy-prod") {
		t.Errorf("/agentgate routines by bob in %s lists deploy-prod, which he may not run: %q", cardChannel, got)
	}
	for _, who := range [][2]string{{ana, cardChannel}, {bob, "C_OPS"}} {
		if got := command(who[0], who[1], "routines").Text; !strings.Contains(got, "deploy-prod") {
			t.Errorf("/agentgate routines by %s in %s = %q, want deploy-prod (a caller)", who[0], who[1], got)
		}
	}
	// The routines' runs are started by the callers' principals; the refused
	// command started nothing and left an audit row.
	want := []string{"daily-digest|only prod|" + principal(bob) + "|slack:" + cardChannel,
		"deploy-prod||" + principal(ana) + "|slack:" + cardChannel, "deploy-prod||" + principal(bob) + "|slack:C_OPS",
		"daily-digest|again|" + principal(bob) + "|slack:" + cardChannel}
	if !slices.Equal(e.routines.triggered, want) {
		t.Errorf("triggered = %q, want %q", e.routines.triggered, want)
	}
	refused, err := e.db.ListAudit(t.Context(), core.AuditFilter{Action: core.AuditTrigger, Principal: principal(bob)})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for _, a := range refused.Items {
		outcomes[a.Target+" "+a.Outcome]++
	}
	if outcomes["deploy-prod "+core.AuditDenied] != 1 || outcomes["deploy-prod "+core.AuditOK] != 1 || outcomes["daily-digest "+core.AuditOK] != 2 {
		t.Errorf("bob's trigger audit = %v, want one refusal and three triggers (a redelivery is not one)", outcomes)
	}
}

func TestRoutineResultPostedOnce(t *testing.T) {
	t.Parallel()
	e := newApprovalsEnv(t)
	b := core.Binding{Platform: chat.PlatformSlack, Channel: cardChannel}
	long := "*Routine daily-digest*\n\n" + strings.Repeat("All deploys went well. ", 3000)
	for range 2 {
		if err := e.notifier.DeliverResult(t.Context(), b, "routine:run_1:slack:"+cardChannel, long); err != nil {
			t.Fatal(err)
		}
	}
	msgs := e.fake.Messages(cardChannel)
	if len(msgs) < 2 {
		t.Fatalf("a %d-character result was posted as %d messages, want it split", len(long), len(msgs))
	}
	var text strings.Builder
	for _, m := range msgs {
		if m.ThreadTS != "" {
			t.Errorf("result posted in a thread (%s), want top level", m.ThreadTS)
		}
		text.WriteString(m.Text)
	}
	if got := strings.Count(text.String(), "deploys"); got != 3000 {
		t.Errorf("posted %d of the 3000 \"deploys\" (delivered twice, posted once)", got)
	}
}
