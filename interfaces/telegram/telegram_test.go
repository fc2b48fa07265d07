package telegram_test

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

	"github.com/go-telegram/bot/models"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/telegram"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
	"github.com/agentgate/agentgate/store/sqlite"
)

const (
	token   = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"
	secret  = "s3cret-token_0123456789"
	groupID = -1001234567890
	anaID   = 5550001
)

// echoModel answers with its agent's name, how many messages it saw and the
// last one.
type echoModel struct{ name string }

func (m echoModel) Generate(_ context.Context, req core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1].Content
	return core.ModelResponse{Text: fmt.Sprintf("%s saw %d: %s.", m.name, len(req.Messages), last)}, nil
}

type fakeRoutines struct {
	mu        sync.Mutex
	triggered []string
}

func (f *fakeRoutines) List(context.Context, core.ListOptions) (core.Page[core.Routine], error) {
	return core.Page[core.Routine]{Items: []core.Routine{{ID: "daily-report", AgentID: "ops", Schedule: "0 9 * * *", Enabled: true}}}, nil
}

func (f *fakeRoutines) TriggerIn(_ context.Context, id, extra, user string, b core.Binding, _ string) (core.Run, error) {
	if id != "daily-report" {
		return core.Run{}, core.ErrNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.triggered = append(f.triggered, fmt.Sprintf("%s|%s|%s|%s:%s", id, extra, user, b.Platform, b.Channel))
	return core.Run{ID: "run_0000000000000001"}, nil
}

type env struct {
	db       *sqlite.DB
	fake     *telegramtest.Server
	client   *telegram.Client
	notifier *telegram.Notifier
	router   *chat.Approvals
	h        *telegram.Handler
	routines *fakeRoutines
	release  chan struct{} // lets the slow agent finish
}

// gateModel streams "partial answer", then waits for release.
type gateModel struct{ release chan struct{} }

func (m gateModel) Generate(ctx context.Context, _ core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	delta("partial answer")
	select {
	case <-m.release:
	case <-ctx.Done():
		return core.ModelResponse{}, ctx.Err()
	}
	return core.ModelResponse{Text: "partial answer, and the rest."}, nil
}

// newEnv starts a gateway on SQLite against a fake Bot API; live replies
// show after liveInterval (0: never in a test's time).
func newEnv(t *testing.T, groupMode string, liveInterval ...time.Duration) *env {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{db: db, fake: telegramtest.New(token), routines: &fakeRoutines{}, release: make(chan struct{})}
	t.Cleanup(e.fake.Close)
	if e.client, err = telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: e.fake.URL}); err != nil {
		t.Fatal(err)
	}
	live := time.Hour
	if len(liveInterval) > 0 {
		live = liveInterval[0]
	}
	if e.notifier, err = telegram.NewNotifier(telegram.NotifierConfig{Store: db, Client: e.client, LiveInterval: live}); err != nil {
		t.Fatal(err)
	}
	e.router = &chat.Approvals{Store: db, Renderers: map[string]chat.ApprovalRenderer{chat.PlatformTelegram: e.notifier}}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Logger: log,
		Agents: map[string]*core.Agent{
			"helper": {ID: "helper", Model: echoModel{"helper"}},
			"ops":    {ID: "ops", Model: echoModel{"ops"}},
			"slow":   {ID: "slow", Model: gateModel{e.release}},
		},
		OnFinish: e.notifier.OnFinish, Handlers: e.notifier.Handlers(), Progress: e.notifier.Progress})
	if err != nil {
		t.Fatal(err)
	}
	me, err := e.client.Me(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e.h, err = telegram.NewHandler(telegram.HandlerConfig{
		WebhookSecret: secret, Engine: eng, Inbox: db, Outbox: db, Client: e.client, Logger: log,
		Parser:    telegram.Parser{BotID: me.ID, BotUsername: me.Username, GroupMode: groupMode},
		Approvals: approval.New(approval.Config{Store: db, Logger: log}), Store: db, Routines: e.routines,
		DefaultAgent: "helper", Chats: map[string]string{fmt.Sprint(groupID): "ops", "5550003": "slow"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Start(ctx) })
	wg.Go(func() { _ = e.h.Start(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return e
}

func payload(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) post(t *testing.T, secretToken string, body []byte) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/telegram/webhook", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if secretToken != "" {
		req.Header.Set(telegram.SecretHeader, secretToken)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec.Code
}

// waitFor waits until cond holds of the fake's state.
func waitFor(t *testing.T, fake *telegramtest.Server, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := fake.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; messages: %+v", what, fake.Messages())
		}
	}
}

func messagesIn(fake *telegramtest.Server, chat int64) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range fake.Messages() {
		if m.ChatID == chat {
			out = append(out, m)
		}
	}
	return out
}

func TestWebhookSecretDedupeAndReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	body := payload(t, "private_message.json")
	for _, bad := range []string{"", "wrong"} {
		if code := e.post(t, bad, body); code != http.StatusUnauthorized {
			t.Fatalf("secret %q: got %d, want 401", bad, code)
		}
	}
	for range 3 { // Telegram's retries of one update
		if code := e.post(t, secret, body); code != http.StatusOK {
			t.Fatalf("got %d, want 200", code)
		}
	}
	waitFor(t, e.fake, "the answer", func() bool { return len(messagesIn(e.fake, anaID)) > 0 })
	got := messagesIn(e.fake, anaID)
	if len(got) != 1 || got[0].Text != `helper saw 1: hello\.` || got[0].ParseMode != "MarkdownV2" {
		t.Fatalf("answers = %+v, want one MarkdownV2 message `helper saw 1: hello\\.`", got)
	}
	if code := e.post(t, secret, []byte(`{"update_id":`)); code != http.StatusBadRequest {
		t.Fatalf("malformed update: got %d, want 400", code)
	}
}

func TestGroupsAndTopics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, telegram.GroupMentionOrReply)
	for _, f := range []string{"group_plain.json", "group_mention.json", "group_reply.json", "topic_mention.json"} {
		if code := e.post(t, secret, payload(t, f)); code != http.StatusOK {
			t.Fatalf("%s: got %d", f, code)
		}
	}
	waitFor(t, e.fake, "two answers in the group and one in the topic", func() bool {
		return len(messagesIn(e.fake, groupID)) == 2 && len(messagesIn(e.fake, -1009876543210)) == 1
	})
	group := messagesIn(e.fake, groupID)
	// The mention is stripped; the reply to the bot continues the group's session.
	if group[0].Text != `ops saw 1: status of web?\.` || group[1].Text != `ops saw 3: and api?\.` {
		t.Fatalf("group answers = %q, %q", group[0].Text, group[1].Text)
	}
	topic := messagesIn(e.fake, -1009876543210)[0]
	if topic.ThreadID != 77 || topic.Text != `helper saw 1: hey , deploy plan?\.` && topic.Text != `helper saw 1: hey, deploy plan?\.` {
		t.Fatalf("topic answer = %+v, want in thread 77", topic)
	}
}

func TestGroupModeAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, telegram.GroupAll)
	e.post(t, secret, payload(t, "group_plain.json"))
	waitFor(t, e.fake, "an answer to a plain group message", func() bool { return len(messagesIn(e.fake, groupID)) == 1 })
}

func TestPollerStoresBeforeConfirming(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.fake.Push(string(payload(t, "private_message.json")))
	e.fake.Push(string(payload(t, "group_mention.json")))
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = (&telegram.Poller{Client: e.client, Sink: e.h, Timeout: time.Second}).Start(ctx) })
	defer func() { cancel(); wg.Wait() }()
	waitFor(t, e.fake, "both answers", func() bool {
		return len(messagesIn(e.fake, anaID)) == 1 && len(messagesIn(e.fake, groupID)) == 1
	})
	waitFor(t, e.fake, "the offset past both updates", func() bool {
		for _, o := range e.fake.Offsets() {
			if o == 815000004 {
				return true
			}
		}
		return false
	})
	// A second poller (after a crash, before the confirmation) gets the
	// same updates again: the inbox drops them.
	e.fake.Push(string(payload(t, "private_message.json")))
	waitFor(t, e.fake, "the redelivery taken", func() bool {
		o := e.fake.Offsets()
		return len(o) > 0 && o[len(o)-1] == 815000004
	})
	if n := len(messagesIn(e.fake, anaID)); n != 1 {
		t.Fatalf("answers to ana = %d after a redelivery, want 1", n)
	}
}

// pause creates a Telegram run of bob's in the group and pauses it for a
// deploy approval under policy.
func (e *env) pause(t *testing.T, policy core.ApprovalPolicy) core.Approval {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	run, err := e.db.CreateRun(ctx, core.NewRun{
		Session: core.Session{ID: "ops:telegram::-1001234567890:" + core.NewID("s"),
			Binding: core.Binding{Platform: chat.PlatformTelegram, Channel: fmt.Sprint(groupID)}},
		Run:    core.Run{ID: core.NewID("run"), AgentID: "ops", UserID: "5550002", Type: core.RunTypeAPI, Input: "deploy web"},
		Events: []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "deploy web", UserID: "5550002"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ClaimRun(ctx, run.ID, "w", now, now.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	a := core.Approval{ID: core.NewID("apr"), RunID: run.ID, ToolCallID: "call_1", Tool: "deploy",
		Arguments: json.RawMessage(`{"service":"web","env":"prod-1"}`), Policy: policy, RequestedBy: "5550002",
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
		t.Fatal(err)
	}
}

func click(t *testing.T, e *env, updateID, queryID string, user int64, data string) {
	t.Helper()
	body := string(payload(t, "callback_query.json"))
	body = strings.NewReplacer("815000007", updateID, "4382bfdwdsb323b2d9", queryID, "a:APPROVAL_ID", data,
		`"id": 5550001`, fmt.Sprintf(`"id": %d`, user)).Replace(body)
	if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
		t.Fatalf("click: got %d", code)
	}
	waitFor(t, e.fake, "the click answered", func() bool { _, ok := e.fake.Answer(queryID); return ok })
}

func TestApprovalCardAndClicks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{fmt.Sprint(anaID)}})
	e.render(t, a.ID)
	e.render(t, a.ID) // a retried job: still one card
	cards := messagesIn(e.fake, groupID)
	if len(cards) != 1 {
		t.Fatalf("cards = %d, want 1", len(cards))
	}
	var kb models.InlineKeyboardMarkup
	if err := json.Unmarshal([]byte(cards[0].ReplyMarkup), &kb); err != nil || len(kb.InlineKeyboard) != 1 || len(kb.InlineKeyboard[0]) != 2 {
		t.Fatalf("keyboard = %s (%v)", cards[0].ReplyMarkup, err)
	}
	for _, b := range kb.InlineKeyboard[0] {
		if len(b.CallbackData) > 64 {
			t.Fatalf("callback_data %q is over 64 bytes", b.CallbackData)
		}
	}
	if !strings.Contains(cards[0].Text, `prod\-1`) && !strings.Contains(cards[0].Text, `"env": "prod-1"`) {
		t.Fatalf("card text = %q", cards[0].Text)
	}

	click(t, e, "815000010", "q-bob", 5550002, kb.InlineKeyboard[0][0].CallbackData)
	if ans, _ := e.fake.Answer("q-bob"); !strings.Contains(ans, "may not decide") {
		t.Fatalf("bob's click answered %q, want a refusal", ans)
	}
	if got, _ := e.db.GetApproval(t.Context(), a.ID); got.Status != core.ApprovalPending {
		t.Fatalf("after a refused click the approval is %s", got.Status)
	}
	click(t, e, "815000011", "q-ana", anaID, kb.InlineKeyboard[0][1].CallbackData)
	got, _ := e.db.GetApproval(t.Context(), a.ID)
	if got.Status != core.ApprovalDenied || got.DecidedVia != chat.PlatformTelegram || got.DecidedBy != fmt.Sprint(anaID) {
		t.Fatalf("approval = %s by %s via %s", got.Status, got.DecidedBy, got.DecidedVia)
	}
	e.render(t, a.ID)
	card := messagesIn(e.fake, groupID)[0]
	if card.Edits != 1 || !strings.Contains(card.Text, "Denied") || strings.Contains(card.ReplyMarkup, "callback_data") {
		t.Fatalf("card after deny = %+v", card)
	}
	click(t, e, "815000012", "q-late", anaID, kb.InlineKeyboard[0][0].CallbackData)
	if ans, _ := e.fake.Answer("q-late"); !strings.Contains(ans, "already denied") {
		t.Fatalf("late click answered %q", ans)
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	if code := e.post(t, secret, payload(t, "command_run.json")); code != http.StatusOK {
		t.Fatalf("got %d", code)
	}
	waitFor(t, e.fake, "the /run answer", func() bool { return len(messagesIn(e.fake, groupID)) == 1 })
	if got := messagesIn(e.fake, groupID)[0].Text; !strings.Contains(got, `Running daily\-report`) {
		t.Fatalf("/run answered %q", got)
	}
	e.routines.mu.Lock()
	trig := e.routines.triggered
	e.routines.mu.Unlock()
	if len(trig) != 1 || trig[0] != "daily-report|for web|5550002|telegram:-1001234567890" {
		t.Fatalf("triggered = %q", trig)
	}
	if err := e.client.SetCommands(t.Context(), telegram.Commands); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"run", "routines", "approvals", "new", "help"} {
		if !strings.Contains(e.fake.Commands(), `"command":"`+c+`"`) {
			t.Fatalf("setMyCommands = %s, missing %s", e.fake.Commands(), c)
		}
	}
}

// newClient returns a client of a fake Bot API of its own.
func newClient(t *testing.T) (*telegramtest.Server, *telegram.Client) {
	t.Helper()
	fake := telegramtest.New(token)
	t.Cleanup(fake.Close)
	c, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

func TestClientRetriesAfter429(t *testing.T) {
	t.Parallel()
	fake, c := newClient(t)
	fake.Fail429("sendMessage", 1)
	if _, err := c.Send(t.Context(), 42, 0, "hi", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Messages()); n != 1 {
		t.Fatalf("messages = %d, want 1", n)
	}
}

func TestRoutineDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	long := strings.Repeat("line with a dot.\n", 600) // ~10,200 characters
	b := core.Binding{Platform: chat.PlatformTelegram, Channel: fmt.Sprint(groupID)}
	for range 2 { // a retry posts nothing twice
		if err := e.notifier.DeliverResult(t.Context(), b, "routine:r1:run_1", long); err != nil {
			t.Fatal(err)
		}
	}
	got := messagesIn(e.fake, groupID)
	if len(got) != 3 {
		t.Fatalf("parts = %d, want 3", len(got))
	}
}

func TestLiveReplyIsEditedIntoTheAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "", 20*time.Millisecond)
	body := strings.NewReplacer("5550001", "5550003", "815000001", "815000099").Replace(string(payload(t, "private_message.json")))
	if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
		t.Fatalf("got %d", code)
	}
	waitFor(t, e.fake, "the live message", func() bool {
		ms := messagesIn(e.fake, 5550003)
		return len(ms) == 1 && ms[0].Text == "partial answer"
	})
	close(e.release)
	waitFor(t, e.fake, "the live message edited into the answer", func() bool {
		ms := messagesIn(e.fake, 5550003)
		return len(ms) == 1 && ms[0].Text == `partial answer, and the rest\.`
	})
}

func TestNewStartsFreshConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	base := string(payload(t, "private_message.json"))
	send := func(updateID, text string, entities string) {
		t.Helper()
		body := strings.NewReplacer("815000001", updateID, `"text": "hello"`, `"text": "`+text+`"`+entities).Replace(base)
		if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
			t.Fatalf("got %d", code)
		}
	}
	wantLast := func(n int, text string) {
		t.Helper()
		waitFor(t, e.fake, text, func() bool {
			ms := messagesIn(e.fake, anaID)
			return len(ms) == n && ms[n-1].Text == text
		})
	}
	send("815000101", "one", "")
	wantLast(1, `helper saw 1: one\.`)
	send("815000102", "two", "")
	wantLast(2, `helper saw 3: two\.`)
	send("815000103", "/new", `, "entities": [{"offset": 0, "length": 4, "type": "bot_command"}]`)
	wantLast(3, `Started a fresh conversation: the agent no longer sees what was said before\.`)
	send("815000104", "three", "")
	wantLast(4, `helper saw 1: three\.`)
	send("815000105", "/new", `, "entities": [{"offset": 0, "length": 4, "type": "bot_command"}]`)
	wantLast(5, `Started a fresh conversation: the agent no longer sees what was said before\.`)
	send("815000106", "four", "")
	wantLast(6, `helper saw 1: four\.`)
}

func TestUnescapedMarkdownIsARefusal(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	_, err := c.Send(t.Context(), 42, 0, "v1.2 is out!", nil)
	if err == nil || errors.Is(err, telegram.ErrMaybePosted) {
		t.Fatalf("err = %v, want Telegram's refusal", err)
	}
	if _, err := c.Send(t.Context(), 42, 0, telegram.Markdown("v1.2 is **out**! `x.y`"), nil); err != nil {
		t.Fatal(err)
	}
}
