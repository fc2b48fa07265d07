package discord_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/discord"
	"github.com/agentgate/agentgate/interfaces/discord/discordtest"
	"github.com/agentgate/agentgate/store/sqlite"
)

// Interactions (signed endpoint, approval buttons, application commands) on
// a real store against the fake Discord.

const (
	thread  = "1200000000000000001" // the run's thread
	ana     = "500000000000000001"
	bob     = "500000000000000002"
	oncall  = "600000000000000001" // a role
	channel = "1100000000000000001"
)

// principal is the principal id of Discord user user (discord:<user>), as
// requested_by, decided_by and routine triggers record it.
func principal(user string) string {
	return approval.ChatPrincipal(chat.PlatformDiscord, "", user, "").ID
}

type env struct {
	db       *sqlite.DB
	fake     *discordtest.Server
	key      discordtest.Key
	client   *discord.Client
	notifier *discord.Notifier
	router   *chat.Approvals
	aps      *approval.Service
	h        *discord.Handler
	srv      *httptest.Server
	routines *fakeRoutines
	runs     *recordSubmitter
}

type recordSubmitter struct {
	mu   sync.Mutex
	reqs []core.SubmitRequest
}

func (r *recordSubmitter) Submit(_ context.Context, req core.SubmitRequest) (core.Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return core.Run{ID: "run_" + req.DedupeKey}, nil
}

func (r *recordSubmitter) all() []core.SubmitRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.SubmitRequest(nil), r.reqs...)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{db: db, fake: discordtest.NewServer(), key: discordtest.NewKey(), routines: &fakeRoutines{}, runs: &recordSubmitter{}}
	t.Cleanup(e.fake.Close)
	if e.client, err = discord.NewClient(discord.ClientConfig{Token: discordtest.Token, APIURL: e.fake.APIURL(), Logger: log}); err != nil {
		t.Fatal(err)
	}
	if e.notifier, err = discord.NewNotifier(chat.NotifierConfig[*discord.Client]{Outbox: db, Client: e.client, Logger: log}); err != nil {
		t.Fatal(err)
	}
	e.router = &chat.Approvals{Store: db, Renderers: map[string]chat.ApprovalRenderer{chat.PlatformDiscord: e.notifier}}
	// Cards: a click counts only from the card the notifier posted (outbox).
	e.aps = approval.New(approval.Config{Store: db, Logger: log, Cards: db})
	e.h, err = discord.NewHandler(discord.HandlerConfig{
		Threads:   chat.Threads{Sessions: db, Channels: map[string]string{channel: "deployer"}, ThreadFollowUps: true, IgnoreBots: true},
		Intake:    chat.Intake{Engine: e.runs, DefaultAgent: "ops", Logger: log, Inbox: db},
		PublicKey: e.key.PublicHex(), ApplicationID: discordtest.AppID, BotUserID: discordtest.BotID,
		Client:   e.client,
		Interact: discord.InteractConfig{Approvals: e.aps, Store: db, Routines: e.routines},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { defer close(started); _ = e.h.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-started })
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(e.srv.Close)
	return e
}

// pause creates a Discord run of bob's in the thread, paused for a deploy
// approval under policy; bob's principal is the requester, as the engine
// records it for a run started in Discord.
func (e *env) pause(t *testing.T, policy core.ApprovalPolicy) core.Approval {
	t.Helper()
	return e.pauseArgs(t, policy, `{"service":"web","env":"production"}`)
}

// pauseArgs is pause, for a call with args.
func (e *env) pauseArgs(t *testing.T, policy core.ApprovalPolicy, args string) core.Approval {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	run, err := e.db.CreateRun(ctx, core.NewRun{
		Session: core.Session{ID: core.NewID("s"), Binding: core.Binding{Platform: chat.PlatformDiscord, Workspace: discordtest.GuildID, Channel: thread}},
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
	return a
}

func (e *env) render(t *testing.T, id string) {
	t.Helper()
	a, err := e.db.GetApproval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.router.Handle(t.Context(), core.ApprovalJobFor(id, a.Status)); err != nil {
		t.Fatalf("render approval %s: %v", id, err)
	}
}

// cardID is the message id of approval id's card: the message the outbox
// recorded as sent, which the fake holds in the thread.
func (e *env) cardID(t *testing.T, id string) string {
	t.Helper()
	state, ref, err := e.db.SendRef(t.Context(), core.CardKey(chat.PlatformDiscord, id))
	if err != nil || state != core.SendSent {
		t.Fatalf("card of %s: state %q, %v; want sent (render it first)", id, state, err)
	}
	for _, m := range e.fake.Messages(thread) {
		if m.ID == ref {
			return ref
		}
	}
	t.Fatalf("card of %s: no message %s in the thread", id, ref)
	return ""
}

// click is the interaction of user (with roles) clicking the button
// customID on message msg of channel, as Discord sends it: the clicked
// message comes with the interaction.
func (e *env) click(channel, msg, user string, roles []string, customID string) map[string]any {
	i := e.fake.Interaction(3, channel, user, roles, discordtest.Button(customID))
	i["message"] = map[string]any{"id": msg, "channel_id": channel, "type": 0, "content": "", "author": map[string]any{"id": discordtest.BotID, "username": "agentgate", "bot": true}}
	return i
}

// submit is the submission of the modal customID, opened from the card
// msg, with reason typed in.
func (e *env) submit(channel, msg, user string, roles []string, customID, reason string) map[string]any {
	i := e.click(channel, msg, user, roles, customID)
	i["type"] = 5
	i["data"] = discordtest.ModalSubmit(customID, "reason", reason)
	return i
}

// post sends an interaction, signed, and decodes the response.
func (e *env) post(t *testing.T, v any) map[string]any {
	t.Helper()
	resp, body, err := e.key.Post(e.srv.URL, v)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("interaction: %d %s", resp.StatusCode, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("response %s: %v", body, err)
	}
	return out
}

func TestInteractionSignature(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ping := map[string]any{"id": e.fake.ID(), "application_id": discordtest.AppID, "type": 1, "token": "t", "version": 1}
	if got := e.post(t, ping); got["type"] != float64(1) {
		t.Errorf("PING answered %v, want type 1 (PONG)", got)
	}
	for name, k := range map[string]discordtest.Key{"unsigned": {}, "wrong key": discordtest.NewKey()} {
		resp, body, err := k.Post(e.srv.URL, ping)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, resp.StatusCode, body)
		}
	}
	// A signed body that was altered after signing.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(`{"type":1}`))
	e.key.Sign(req, []byte(`{"type":2}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("tampered body: %d, want 401", resp.StatusCode)
	}
}

func buttonIDs(m discordtest.Message) []string {
	var ids []string
	for _, row := range m.Components {
		for _, c := range row.(map[string]any)["components"].([]any) {
			b := c.(map[string]any)
			ids = append(ids, fmt.Sprintf("%v/%v", b["style"], b["custom_id"]))
		}
	}
	return ids
}

func TestApprovalButtons(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{ana, oncall}})
	e.render(t, a.ID)
	e.render(t, a.ID) // a retried job posts no second card
	cards := e.fake.Messages(thread)
	if len(cards) != 1 {
		t.Fatalf("cards = %+v, want one", cards)
	}
	want := []string{"3/agentgate:approve:" + a.ID, "4/agentgate:deny:" + a.ID}
	if got := buttonIDs(cards[0]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("buttons = %v, want %v (success, danger)", got, want)
	}
	if !strings.Contains(cards[0].Content, "`deploy`") || !strings.Contains(cards[0].Content, "Who may decide: <@"+ana+">, <@"+oncall+">") {
		t.Errorf("card = %q, want who may decide", cards[0].Content)
	}
	if !strings.Contains(cards[0].Content, "Requested by <@"+bob+">") {
		t.Errorf("card = %q, want the requester (%s) as a mention", cards[0].Content, principal(bob))
	}
	card := e.cardID(t, a.ID)
	const carol = "500000000000000003" // has the on-call role

	// refused checks that a click answered an ephemeral refusal with why,
	// and left the approval pending and the card as it was.
	refused := func(what string, got map[string]any, why string) {
		t.Helper()
		data, _ := got["data"].(map[string]any)
		if got["type"] != float64(4) || data["flags"] != float64(64) || !strings.Contains(fmt.Sprint(data["content"]), "may not decide") ||
			!strings.Contains(fmt.Sprint(data["content"]), why) {
			t.Errorf("%s answered %v, want an ephemeral refusal: %s", what, got, why)
		}
		if st, _ := e.db.GetApproval(t.Context(), a.ID); st.Status != core.ApprovalPending {
			t.Fatalf("%s decided: %s", what, st.Status)
		}
		if cards := e.fake.Messages(thread); len(cards) != 1 || cards[0].Edits != 0 || len(cards[0].Components) == 0 {
			t.Fatalf("%s changed the card: %+v", what, cards)
		}
	}

	// bob is neither an approver nor in the role: refused, even from the card.
	refused("bob's click", e.post(t, e.click(thread, card, bob, nil, "agentgate:approve:"+a.ID)), "not in the tool's approvers")

	// The same button value from anywhere but the card decides nothing,
	// even for an approver: another message of the thread, the card's id in
	// another channel, no message at all.
	const offCard = "the click did not come from this request's card in its conversation"
	refused("a click on another message", e.post(t, e.click(thread, e.fake.ID(), carol, []string{oncall}, "agentgate:deny:"+a.ID)), offCard)
	refused("a click in another channel", e.post(t, e.click(channel, card, carol, []string{oncall}, "agentgate:deny:"+a.ID)), offCard)
	refused("a click without its message", e.post(t, e.fake.Interaction(3, thread, ana, nil, discordtest.Button("agentgate:approve:"+a.ID))), offCard)

	// An approver key decides nothing here: the tool's approvers do not name it.
	var na *approval.NotAllowedError
	if _, err := e.aps.Decide(t.Context(), a.ID, approval.Request{Principal: approval.KeyPrincipal("ops-key", approval.RoleAdmin, nil, approval.RouteAPI)}); !errors.As(err, &na) {
		t.Fatalf("a key the approvers do not name decided a Discord request: %v", err)
	}

	// carol, in the on-call role, denies from the card: a modal asks for
	// a reason, and its submission decides.
	got := e.post(t, e.click(thread, card, carol, []string{oncall}, "agentgate:deny:"+a.ID))
	data, _ := got["data"].(map[string]any)
	if got["type"] != float64(9) || data["custom_id"] != "agentgate:deny:"+a.ID || !strings.Contains(fmt.Sprint(data["components"]), "custom_id:reason") {
		t.Fatalf("deny click answered %v, want a MODAL asking for a reason", got)
	}
	if st, _ := e.db.GetApproval(t.Context(), a.ID); st.Status != core.ApprovalPending {
		t.Fatalf("the deny click decided before its reason: %s", st.Status)
	}
	// The submission is checked like a click: bob's is refused.
	refused("bob's modal submission", e.post(t, e.submit(thread, card, bob, nil, "agentgate:deny:"+a.ID, "no")), "not in the tool's approvers")
	got = e.post(t, e.submit(thread, card, carol, []string{oncall}, "agentgate:deny:"+a.ID, "  not during the freeze "))
	data, _ = got["data"].(map[string]any)
	if got["type"] != float64(7) || !strings.Contains(fmt.Sprint(data["content"]), "Denied by <@"+carol+">") {
		t.Errorf("deny submission answered %v, want an UPDATE_MESSAGE with the outcome", got)
	}
	st, _ := e.db.GetApproval(t.Context(), a.ID)
	if st.Status != core.ApprovalDenied || st.DecidedBy != principal(carol) || st.DecidedVia != chat.PlatformDiscord || st.Reason != "not during the freeze" {
		t.Fatalf("approval = %s by %s via %s (%q), want denied by %s via discord with the reason", st.Status, st.DecidedBy, st.DecidedVia, st.Reason, principal(carol))
	}
	e.render(t, a.ID) // the approval job edits the card
	cards = e.fake.Messages(thread)
	if len(cards) != 1 || len(cards[0].Components) != 0 || !strings.Contains(cards[0].Content, "Denied") {
		t.Errorf("card after the decision = %+v, want the outcome without buttons", cards)
	}

	// A second click on the card: already decided.
	got = e.post(t, e.click(thread, card, ana, nil, "agentgate:approve:"+a.ID))
	data, _ = got["data"].(map[string]any)
	if !strings.Contains(fmt.Sprint(data["content"]), "already denied by <@"+carol+">") {
		t.Errorf("late click answered %v", got)
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
	e := newEnv(t)
	a := e.pauseArgs(t, core.ApprovalPolicy{Approvers: []string{ana}}, workflowCall)
	e.render(t, a.ID)
	cards := e.fake.Messages(thread)
	if len(cards) != 1 {
		t.Fatalf("cards = %+v, want one", cards)
	}
	if got, want := buttonIDs(cards[0]), []string{"4/agentgate:deny:" + a.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("buttons = %v, want Deny alone %v", got, want)
	}
	const note = "Arguments cut: 1,198 of 5,149 characters shown. Approve only where they show in full: agentgate approvals list, or GET /api/v1/approvals/"
	if !strings.Contains(cards[0].Content, note) {
		t.Errorf("card = %q, want the note %q", cards[0].Content, note)
	}
	card := e.cardID(t, a.ID)

	got := e.post(t, e.click(thread, card, ana, nil, "agentgate:approve:"+a.ID))
	data, _ := got["data"].(map[string]any)
	if got["type"] != float64(4) || data["flags"] != float64(64) || !strings.Contains(fmt.Sprint(data["content"]), note+a.ID) {
		t.Errorf("Approve answered %v, want an ephemeral %q", got, note+a.ID)
	}
	if st, _ := e.db.GetApproval(t.Context(), a.ID); st.Status != core.ApprovalPending {
		t.Fatalf("Approve on a card of cut arguments decided: %s", st.Status)
	}
	if cards := e.fake.Messages(thread); len(cards) != 1 || cards[0].Edits != 0 {
		t.Fatalf("Approve changed the card: %+v", cards)
	}

	if got := e.post(t, e.click(thread, card, ana, nil, "agentgate:deny:"+a.ID)); got["type"] != float64(9) {
		t.Fatalf("Deny answered %v, want a MODAL asking for a reason", got)
	}
	got = e.post(t, e.submit(thread, card, ana, nil, "agentgate:deny:"+a.ID, "not this repo"))
	if got["type"] != float64(7) {
		t.Errorf("deny submission answered %v, want an UPDATE_MESSAGE with the outcome", got)
	}
	if st, _ := e.db.GetApproval(t.Context(), a.ID); st.Status != core.ApprovalDenied || st.DecidedBy != principal(ana) || st.Reason != "not this repo" {
		t.Fatalf("approval = %s by %s (%q), want denied by %s", st.Status, st.DecidedBy, st.Reason, principal(ana))
	}
}

type fakeRoutines struct {
	mu        sync.Mutex
	triggered []string
}

func (f *fakeRoutines) List(context.Context, core.RoutineFilter) (core.Page[core.Routine], error) {
	return core.Page[core.Routine]{Items: []core.Routine{{ID: "daily-digest", AgentID: "ops", Schedule: "0 9 * * 1-5", Enabled: true,
		Callers: []string{"channel:discord:1100000000000000001"}},
		{ID: "deploy-prod", AgentID: "ops", Schedule: "@daily", Callers: []string{"role-deployers"}}}}, nil
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
	f.mu.Lock()
	defer f.mu.Unlock()
	f.triggered = append(f.triggered, fmt.Sprintf("%s|%s|%s|%s:%s", id, extra, user, b.Platform, b.Channel))
	return core.Run{ID: "run_digest1"}, nil
}

func TestCommandDeferredThenFollowup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{ana}})
	cases := []struct {
		sub     string
		opts    map[string]string
		channel string
		user    string
		roles   []string
		want    string
	}{
		{"help", nil, channel, ana, nil, "/agentgate run"},
		{"routines", nil, channel, ana, nil, "daily-digest"},
		// approvals lists what the asker may decide in this conversation:
		// ana, an approver, in the run's thread; not bob, nor ana elsewhere.
		{"approvals", nil, thread, ana, nil, "wants to run `deploy` (approval `" + a.ID + "`"},
		{"approvals", nil, thread, bob, nil, "Nothing is waiting"},
		{"approvals", nil, channel, ana, nil, "Nothing is waiting"},
		{"run", map[string]string{"routine": "daily-digest", "input": "only prod"}, channel, ana, nil, "Started routine `daily-digest`"},
		{"run", map[string]string{"routine": "nope"}, channel, ana, nil, "no routine `nope`"},
		// deploy-prod may be run by members of the Discord role role-deployers only.
		{"run", map[string]string{"routine": "deploy-prod"}, channel, bob, nil, "You may not run routine `deploy-prod`: not among the routine's callers"},
		{"run", map[string]string{"routine": "deploy-prod"}, channel, bob, []string{"role-deployers"}, "Started routine `deploy-prod`"},
		{"routines", nil, channel, bob, []string{"role-deployers"}, "deploy-prod"},
		{"routines", nil, channel, bob, nil, "daily-digest"}, // and not deploy-prod: checked below
	}
	for i, c := range cases {
		got := e.post(t, e.fake.Interaction(2, c.channel, c.user, c.roles, discordtest.Command(c.sub, c.opts)))
		if got["type"] != float64(5) {
			t.Errorf("%s: answered %v, want type 5 (deferred)", c.sub, got)
		}
		if !e.fake.Wait(10*time.Second, func() bool { return len(e.fake.Followups()) > i }) {
			t.Fatalf("%s: no follow-up", c.sub)
		}
		f := e.fake.Followups()[i]
		if !strings.HasPrefix(f.Path, "/webhooks/"+discordtest.AppID+"/itoken-") || !strings.Contains(fmt.Sprint(f.Body["content"]), c.want) {
			t.Errorf("%s by %s in %s: follow-up %s %v, want %q", c.sub, c.user, c.channel, f.Path, f.Body["content"], c.want)
		}
	}
	if last := fmt.Sprint(e.fake.Followups()[len(cases)-1].Body["content"]); strings.Contains(last, "deploy-prod") {
		t.Errorf("routines by bob without the role lists deploy-prod, which he may not run: %q", last)
	}
	// The routine's run is ana's: her principal id.
	if fmt.Sprint(e.routines.triggered) != "[daily-digest|only prod|"+principal(ana)+"|discord:"+channel+" deploy-prod||"+principal(bob)+"|discord:"+channel+"]" {
		t.Errorf("triggered %v", e.routines.triggered)
	}
}

// Payloads as Discord sends them (testdata), through the signed endpoint
// and the Gateway.
func TestRealPayloads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{oncall}})
	raw, err := os.ReadFile("testdata/interaction_button.json")
	if err != nil {
		t.Fatal(err)
	}
	// As recorded, the click is on message 1200000000000000005, which is not
	// this approval's card: refused.
	var click map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "APPROVAL_ID", a.ID)), &click); err != nil {
		t.Fatal(err)
	}
	if got := e.post(t, click); got["type"] != float64(4) || !strings.Contains(fmt.Sprint(got["data"]), "did not come from this request's card") {
		t.Errorf("click on another message answered %v, want a refusal", got)
	}
	if st, _ := e.db.GetApproval(t.Context(), a.ID); st.Status != core.ApprovalPending {
		t.Fatalf("a click off the card decided: %s", st.Status)
	}
	// On the card, once posted, carol's click (in the on-call role) decides.
	e.render(t, a.ID)
	card := e.cardID(t, a.ID)
	body := strings.NewReplacer("APPROVAL_ID", a.ID, `"id": "1200000000000000005"`, `"id": "`+card+`"`).Replace(string(raw))
	click = nil
	if err := json.Unmarshal([]byte(body), &click); err != nil {
		t.Fatal(err)
	}
	if got := e.post(t, click); got["type"] != float64(7) {
		t.Errorf("click answered %v", got)
	}
	if st, _ := e.db.GetApproval(t.Context(), a.ID); st.Status != core.ApprovalApproved || st.DecidedBy != principal("500000000000000003") {
		t.Errorf("approval %s by %s, want approved by carol (%s, role %s)", st.Status, st.DecidedBy, principal("500000000000000003"), oncall)
	}

	raw, err = os.ReadFile("testdata/message_create.json")
	if err != nil {
		t.Fatal(err)
	}
	var m discordgo.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Message(t.Context(), &m); err != nil {
		t.Fatal(err)
	}
	runs := e.waitRuns(t, 1)
	if len(runs) != 1 || runs[0].Input != "what changed in web since yesterday?" || runs[0].Binding.Channel != m.ID || runs[0].AgentID != "deployer" {
		t.Errorf("runs = %+v", runs)
	}
}
