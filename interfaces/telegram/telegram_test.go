package telegram_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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
	bobID   = 5550002
)

// principal is the principal id of Telegram user user (telegram:<user>), as
// requested_by, decided_by and routine triggers record it.
func principal(user int64) string {
	return approval.ChatPrincipal(chat.PlatformTelegram, "", fmt.Sprint(user), "").ID
}

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

func (f *fakeRoutines) List(context.Context, core.RoutineFilter) (core.Page[core.Routine], error) {
	return core.Page[core.Routine]{Items: []core.Routine{{ID: "daily-report", AgentID: "ops", Schedule: "0 9 * * *", Enabled: true,
		Callers: []string{"channel:telegram:-1001234567890"}},
		{ID: "deploy-prod", AgentID: "ops", Schedule: "@daily", Callers: []string{"telegram:5550001"}}}}, nil
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
	parked   chan struct{} // closed at the end: the parked agent gives up
	botID    int64
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

// parkedModel answers nothing until the test ends: a run of the agent
// "parked" (the runs pause() pauses) that the engine picks up stays with it
// until its claim is taken over.
type parkedModel struct{ done chan struct{} }

func (m parkedModel) Generate(ctx context.Context, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	select {
	case <-ctx.Done():
		return core.ModelResponse{}, ctx.Err()
	case <-m.done:
		return core.ModelResponse{}, errors.New("the test ended")
	}
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
	e := &env{db: db, fake: telegramtest.New(token), routines: &fakeRoutines{}, release: make(chan struct{}),
		parked: make(chan struct{})}
	t.Cleanup(e.fake.Close)
	e.fake.Join(groupID, telegramtest.User{ID: anaID, FirstName: "Ana", Username: "ana_ops"})
	e.fake.Join(groupID, telegramtest.User{ID: bobID, FirstName: "Bob", Username: "bob_dev"})
	if e.client, err = telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: e.fake.URL}); err != nil {
		t.Fatal(err)
	}
	live := time.Hour
	if len(liveInterval) > 0 {
		live = liveInterval[0]
	}
	if e.notifier, err = telegram.NewNotifier(chat.NotifierConfig[*telegram.Client]{Outbox: db, Client: e.client}); err != nil {
		t.Fatal(err)
	}
	replies, err := chat.NewReplies(chat.RepliesConfig{Store: db, Platforms: map[string]chat.Platform{chat.PlatformTelegram: e.notifier},
		LiveInterval: live})
	if err != nil {
		t.Fatal(err)
	}
	e.router = &chat.Approvals{Store: db, Renderers: map[string]chat.ApprovalRenderer{chat.PlatformTelegram: e.notifier}}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Logger: log,
		Agents: map[string]*core.Agent{
			"helper": {ID: "helper", Model: echoModel{"helper"}},
			"ops":    {ID: "ops", Model: echoModel{"ops"}},
			"slow":   {ID: "slow", Model: gateModel{e.release}},
			"parked": {ID: "parked", Model: parkedModel{e.parked}},
		},
		OnFinish: replies.OnFinish, Handlers: replies.Handlers(), Progress: replies.Progress})
	if err != nil {
		t.Fatal(err)
	}
	me, err := e.client.Me(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e.botID = me.ID
	// Cards: a click counts only from the card the notifier posted (outbox).
	aps := approval.New(approval.Config{Store: db, Logger: log, Cards: db})
	e.h, err = telegram.NewHandler(telegram.HandlerConfig{
		Intake:        chat.Intake{Engine: eng, Inbox: db, Logger: log, DefaultAgent: "helper"},
		WebhookSecret: secret, Outbox: db, Client: e.client,
		Parser:    telegram.Parser{BotID: me.ID, BotUsername: me.Username, GroupMode: groupMode},
		Approvals: aps, Store: db, Routines: e.routines, Chats: map[string]string{fmt.Sprint(groupID): "ops", "5550003": "slow"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Start(ctx) })
	wg.Go(func() { _ = e.h.Start(ctx) })
	t.Cleanup(func() { close(e.parked); cancel(); wg.Wait() })
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

// unread is a request body the test fails on reading.
type unread struct{ t *testing.T }

func (b unread) Read([]byte) (int, error) {
	b.t.Error("the body of a request declared too large was read")
	return 0, io.EOF
}

// A webhook request with the right secret that declares a body over
// MaxBodyBytes is refused (413) before a byte of it is read.
func TestWebhookBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/telegram/webhook", unread{t})
	req.ContentLength = telegram.MaxBodyBytes + 1
	req.Header.Set(telegram.SecretHeader, secret)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", rec.Code)
	}
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

// TestFileTooLarge: a document over the limit is not fetched; the sender
// is told in the chat, and the agent is told it was not kept.
func TestFileTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	body := strings.Replace(string(payload(t, "private_message.json")), `"text": "hello"`, `"caption": "what is in it?",
    "document": {"file_id": "BQACAgIAAxkBAAIBZ2dump", "file_unique_id": "AgADdump", "file_name": "dump.zip",
      "mime_type": "application/zip", "file_size": 31457280}`, 1)
	if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
		t.Fatalf("got %d", code)
	}
	waitFor(t, e.fake, "the notice and the answer", func() bool { return len(messagesIn(e.fake, anaID)) == 2 })
	got := messagesIn(e.fake, anaID)
	if want := telegram.Escape("dump.zip is 31.5 MB: the agent takes files up to 20.0 MB."); !strings.HasPrefix(got[0].Text, want) {
		t.Errorf("notice = %q, want it to start %q", got[0].Text, want)
	}
	if !strings.Contains(got[1].Text, telegram.Escape("[attached: dump.zip (application/zip, 31.5 MB): not stored: larger than the 20.0 MB limit]")) {
		t.Errorf("answer = %q, want the agent told of the file it could not see", got[1].Text)
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
	// The mention is stripped; the reply to the bot continues the group's
	// session. The two answers' reply jobs may be posted in either order
	// (the second run can finish before the first answer is posted; see the
	// issue on one chat pipeline).
	got := []string{group[0].Text, group[1].Text}
	slices.Sort(got)
	if want := []string{`ops saw 1: status of web?\.`, `ops saw 3: and api?\.`}; !slices.Equal(got, want) {
		t.Fatalf("group answers = %q, want %q", got, want)
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
// deploy approval under policy; bob's principal is the requester, as the
// engine records it for a run started in Telegram.
func (e *env) pause(t *testing.T, policy core.ApprovalPolicy) core.Approval {
	t.Helper()
	return e.pauseArgs(t, policy, `{"service":"web","env":"prod-1"}`)
}

// pauseArgs is pause, for a call with args.
func (e *env) pauseArgs(t *testing.T, policy core.ApprovalPolicy, args string) core.Approval {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	// The engine may pick the run up first (an API run of the parked agent:
	// no live message, no answer); the claim below takes it over, as a node
	// does once a claim ran out.
	run, err := e.db.CreateRun(ctx, core.NewRun{
		Session: core.Session{ID: "parked:telegram::-1001234567890:" + core.NewID("s"),
			Binding: core.Binding{Platform: chat.PlatformTelegram, Channel: fmt.Sprint(groupID)}},
		Run: core.Run{ID: core.NewID("run"), AgentID: "parked", UserID: fmt.Sprint(bobID), StartedBy: principal(bobID),
			Type: core.RunTypeAPI, Input: "deploy web"},
		Events: []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: "deploy web", UserID: "5550002"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	late := now.Add(time.Hour) // past any claim the engine took
	if _, err := e.db.ClaimRun(ctx, run.ID, "w", late, late.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	a := core.Approval{ID: core.NewID("apr"), RunID: run.ID, ToolCallID: "call_1", Tool: "deploy",
		Arguments: json.RawMessage(args), Policy: policy, RequestedBy: principal(bobID),
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

// card is approval id's card: the message the outbox recorded as sent,
// which the fake holds in the group.
func (e *env) card(t *testing.T, id string) telegramtest.Message {
	t.Helper()
	state, ref, err := e.db.SendRef(t.Context(), core.CardKey(chat.PlatformTelegram, id))
	if err != nil || state != core.SendSent {
		t.Fatalf("card of %s: state %q, %v; want sent (render it first)", id, state, err)
	}
	for _, m := range messagesIn(e.fake, groupID) {
		if fmt.Sprint(m.ID) == ref {
			return m
		}
	}
	t.Fatalf("card of %s: no message %s in the group", id, ref)
	return telegramtest.Message{}
}

// click clicks the button with data on the card as user.
func click(t *testing.T, e *env, updateID, queryID string, user int64, card telegramtest.Message, data string) {
	t.Helper()
	clickAt(t, e, updateID, queryID, user, card.ChatID, card.ID, data)
}

// clickAt sends a callback query with data from user on message msg of
// chat, wherever that is.
func clickAt(t *testing.T, e *env, updateID, queryID string, user, chat int64, msg int, data string) {
	t.Helper()
	body := string(payload(t, "callback_query.json"))
	body = strings.NewReplacer("815000007", updateID, "4382bfdwdsb323b2d9", queryID, "a:APPROVAL_ID", data,
		`"id": 5550001`, fmt.Sprintf(`"id": %d`, user), `"message_id": 101`, fmt.Sprintf(`"message_id": %d`, msg),
		`"id": -1001234567890`, fmt.Sprintf(`"id": %d`, chat)).Replace(body)
	if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
		t.Fatalf("click: got %d", code)
	}
	waitFor(t, e.fake, "the click answered", func() bool { _, ok := e.fake.Answer(queryID); return ok })
}

// replyTo sends text from user as a reply to the bot's message m, as
// Telegram delivers it: reply_to_message carries m's plain text.
func replyTo(t *testing.T, e *env, updateID string, user int64, m telegramtest.Message, text string) {
	t.Helper()
	if code := e.post(t, secret, replyBody(e, updateID, user, m, text)); code != http.StatusOK {
		t.Fatalf("reply: got %d", code)
	}
}

// replyBody is the update of replyTo.
func replyBody(e *env, updateID string, user int64, m telegramtest.Message, text string) []byte {
	plain := strings.NewReplacer(`\`, "").Replace(m.Text) // MarkdownV2 → the text Telegram shows
	u := map[string]any{"update_id": json.Number(updateID), "message": map[string]any{
		"message_id": m.ID + 1000, "date": 1764686500, "text": text,
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "U", "username": map[int64]string{anaID: "ana_ops", bobID: "bob_dev"}[user]},
		"chat": map[string]any{"id": m.ChatID, "title": "Ops", "type": "supergroup"},
		"reply_to_message": map[string]any{"message_id": m.ID, "date": 1764686400, "text": plain,
			"from": map[string]any{"id": e.botID, "is_bot": true, "first_name": "agentgate", "username": "agentgate_bot"},
			"chat": map[string]any{"id": m.ChatID, "title": "Ops", "type": "supergroup"}},
	}}
	body, _ := json.Marshal(u)
	return body
}

func TestApprovalCardAndClicks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	a := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(anaID)}})
	e.render(t, a.ID)
	e.render(t, a.ID) // a retried job: still one card
	cards := messagesIn(e.fake, groupID)
	if len(cards) != 1 {
		t.Fatalf("cards = %d, want 1", len(cards))
	}
	card := e.card(t, a.ID)
	var kb models.InlineKeyboardMarkup
	if err := json.Unmarshal([]byte(card.ReplyMarkup), &kb); err != nil || len(kb.InlineKeyboard) != 1 || len(kb.InlineKeyboard[0]) != 2 {
		t.Fatalf("keyboard = %s (%v)", card.ReplyMarkup, err)
	}
	for _, b := range kb.InlineKeyboard[0] {
		if len(b.CallbackData) > 64 {
			t.Fatalf("callback_data %q is over 64 bytes", b.CallbackData)
		}
	}
	approve, deny := kb.InlineKeyboard[0][0].CallbackData, kb.InlineKeyboard[0][1].CallbackData
	if approve != "a:"+a.ID || deny != "d:"+a.ID {
		t.Fatalf("callback_data = %q, %q", approve, deny)
	}
	if !strings.Contains(card.Text, `prod\-1`) && !strings.Contains(card.Text, `"env": "prod-1"`) {
		t.Fatalf("card text = %q", card.Text)
	}
	if !strings.Contains(card.Text, `Who may decide: @ana\_ops`) {
		t.Fatalf("card text = %q, want who may decide: ana by her @handle", card.Text)
	}

	// refused checks that a click was answered with a refusal saying why,
	// and decided nothing: the approval is pending, the card not edited.
	refused := func(what, queryID, why string) {
		t.Helper()
		if ans, _ := e.fake.Answer(queryID); !strings.Contains(ans, "may not decide") || !strings.Contains(ans, why) {
			t.Fatalf("%s answered %q, want a refusal: %s", what, ans, why)
		}
		if got, _ := e.db.GetApproval(t.Context(), a.ID); got.Status != core.ApprovalPending {
			t.Fatalf("after %s the approval is %s", what, got.Status)
		}
		if now := e.card(t, a.ID); now.Edits != 0 || now.Text != card.Text || now.ReplyMarkup != card.ReplyMarkup {
			t.Fatalf("after %s the card is %+v", what, now)
		}
	}

	// bob is not an approver: refused, even from the card.
	click(t, e, "815000010", "q-bob", bobID, card, approve)
	refused("bob's click", "q-bob", "not in the tool's approvers")
	if ans, _ := e.fake.Answer("q-bob"); !strings.Contains(ans, "Who may: @ana_ops.") {
		t.Fatalf("bob's refusal = %q, want it to name who may decide: @ana_ops", ans)
	}

	// Forged callbacks: the card's callback_data from ana, an approver, but
	// from another chat (her private chat, on the card's message id) or on
	// another message of the group decide nothing.
	const offCard = "the click did not come from this request's card in its conversation"
	clickAt(t, e, "815000013", "q-forged-chat", anaID, anaID, card.ID, approve)
	refused("a callback from another chat", "q-forged-chat", offCard)
	clickAt(t, e, "815000014", "q-forged-msg", anaID, groupID, card.ID+1, approve)
	refused("a callback from another message", "q-forged-msg", offCard)

	// ana denies from the card: the bot asks her for a reason, in a
	// message she replies to (ForceReply); the deny waits for it.
	click(t, e, "815000011", "q-ana", anaID, card, deny)
	if ans, _ := e.fake.Answer("q-ana"); !strings.Contains(ans, "Reply to my message with a reason") {
		t.Fatalf("ana's deny answered %q, want to be asked for a reason", ans)
	}
	if got, _ := e.db.GetApproval(t.Context(), a.ID); got.Status != core.ApprovalPending {
		t.Fatalf("the deny click decided before its reason: %s", got.Status)
	}
	var prompt telegramtest.Message
	waitFor(t, e.fake, "the reason prompt", func() bool {
		for _, m := range messagesIn(e.fake, groupID) {
			if strings.Contains(m.Text, "why deny") {
				prompt = m
				return true
			}
		}
		return false
	})
	if !strings.Contains(prompt.ReplyMarkup, `"force_reply":true`) || !strings.Contains(prompt.Text, `@ana\_ops`) {
		t.Fatalf("reason prompt = %+v, want a ForceReply naming ana", prompt)
	}
	// bob's reply to the prompt is no reason (the prompt asks ana): it is
	// a reply to the bot like any other, for the agent.
	replyTo(t, e, "815000015", bobID, prompt, "just because")
	e.said(t, `ops saw 1: just because\.`)
	if got, _ := e.db.GetApproval(t.Context(), a.ID); got.Status != core.ApprovalPending {
		t.Fatalf("bob's reason decided: %s", got.Status)
	}
	// ana's reply denies, with her reason: decided_by is her principal,
	// with her handle.
	replyTo(t, e, "815000016", anaID, prompt, "  not during the freeze ")
	waitFor(t, e.fake, "ana's reason decided", func() bool {
		got, _ := e.db.GetApproval(t.Context(), a.ID)
		return got.Status != core.ApprovalPending
	})
	got, _ := e.db.GetApproval(t.Context(), a.ID)
	if got.Status != core.ApprovalDenied || got.DecidedVia != chat.PlatformTelegram || got.DecidedBy != principal(anaID) ||
		got.DecidedByName != "@ana_ops" || got.Reason != "not during the freeze" {
		t.Fatalf("approval = %s by %s (%q) via %s, reason %q; want denied by %s (@ana_ops) via telegram, with her reason",
			got.Status, got.DecidedBy, got.DecidedByName, got.DecidedVia, got.Reason, principal(anaID))
	}
	e.render(t, a.ID)
	card = e.card(t, a.ID)
	if card.Edits != 1 || !strings.Contains(card.Text, `Denied* by @ana\_ops`) || strings.Contains(card.ReplyMarkup, "callback_data") {
		t.Fatalf("card after deny = %+v", card)
	}
	click(t, e, "815000012", "q-late", anaID, card, approve)
	if ans, _ := e.fake.Answer("q-late"); !strings.Contains(ans, "already denied") {
		t.Fatalf("late click answered %q", ans)
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
	e := newEnv(t, "")
	a := e.pauseArgs(t, core.ApprovalPolicy{Approvers: []string{principal(anaID)}}, workflowCall)
	e.render(t, a.ID)
	card := e.card(t, a.ID)
	if want := `{"inline_keyboard":[[{"text":"❌ Deny","callback_data":"d:` + a.ID + `"}]]}`; card.ReplyMarkup != want {
		t.Errorf("keyboard = %s, want Deny alone: %s", card.ReplyMarkup, want)
	}
	if !strings.Contains(card.Text, `Arguments cut: 2,999 of 5,149 characters shown\.`) {
		t.Errorf("card text = %q, want the note", card.Text)
	}

	note := "Arguments cut: 2,999 of 5,149 characters shown. Approve only where they show in full: agentgate approvals list, or GET /api/v1/approvals/" + a.ID + "."
	click(t, e, "815000020", "q-approve", anaID, card, "a:"+a.ID)
	if ans, _ := e.fake.Answer("q-approve"); ans != note {
		t.Errorf("Approve answered %q, want %q", ans, note)
	}
	if got, _ := e.db.GetApproval(t.Context(), a.ID); got.Status != core.ApprovalPending {
		t.Fatalf("Approve on a card of cut arguments decided: %s", got.Status)
	}
	if now := e.card(t, a.ID); now.Edits != 0 {
		t.Fatalf("Approve changed the card: %+v", now)
	}

	click(t, e, "815000021", "q-deny", anaID, card, "d:"+a.ID)
	if ans, _ := e.fake.Answer("q-deny"); !strings.Contains(ans, "Reply to my message with a reason") {
		t.Fatalf("Deny answered %q, want to be asked for a reason", ans)
	}
	var prompt telegramtest.Message
	waitFor(t, e.fake, "the reason prompt", func() bool {
		for _, m := range messagesIn(e.fake, groupID) {
			if strings.Contains(m.Text, "why deny") {
				prompt = m
				return true
			}
		}
		return false
	})
	replyTo(t, e, "815000022", anaID, prompt, "not this repo")
	waitFor(t, e.fake, "ana's reason decided", func() bool {
		got, _ := e.db.GetApproval(t.Context(), a.ID)
		return got.Status != core.ApprovalPending
	})
	if got, _ := e.db.GetApproval(t.Context(), a.ID); got.Status != core.ApprovalDenied || got.DecidedBy != principal(anaID) || got.Reason != "not this repo" {
		t.Fatalf("approval = %s by %s (%q), want denied by %s", got.Status, got.DecidedBy, got.Reason, principal(anaID))
	}
}

// command sends text (a /command) from user in chat.
func command(t *testing.T, e *env, updateID string, user, chat int64, text string) {
	t.Helper()
	cmd, _, _ := strings.Cut(text, " ")
	chatType := "supergroup"
	if chat > 0 {
		chatType = "private"
	}
	body := strings.NewReplacer("815000006", updateID, `"id": 5550002`, fmt.Sprintf(`"id": %d`, user),
		`"id": -1001234567890, "title": "Ops", "type": "supergroup"`, fmt.Sprintf(`"id": %d, "title": "Ops", "type": %q`, chat, chatType),
		`"text": "/run@agentgate_bot daily-report for web"`, fmt.Sprintf(`"text": %q`, text),
		`"length": 18`, fmt.Sprintf(`"length": %d`, len(cmd))).Replace(string(payload(t, "command_run.json")))
	if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
		t.Fatalf("%s: got %d", text, code)
	}
}

// /approvals lists the approvals of runs in this chat that the asker may
// decide, and nothing of other chats.
func TestApprovalsCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	forAna := e.pause(t, core.ApprovalPolicy{Approvers: []string{principal(anaID)}})
	forBob := e.pause(t, core.ApprovalPolicy{Approvers: []string{fmt.Sprint(bobID)}})
	forKey := e.pause(t, core.ApprovalPolicy{Approvers: []string{"role:admin"}})
	for i, c := range []struct {
		user, chat int64
		want, not  []string
	}{
		{anaID, groupID, []string{forAna.ID}, []string{forBob.ID, forKey.ID}},
		{bobID, groupID, []string{forBob.ID}, []string{forAna.ID, forKey.ID}},
		{anaID, anaID, []string{"Nothing is waiting for your decision here"}, []string{forAna.ID}},
	} {
		n := len(messagesIn(e.fake, c.chat))
		command(t, e, fmt.Sprint(815000200+i), c.user, c.chat, "/approvals")
		waitFor(t, e.fake, "the /approvals answer", func() bool { return len(messagesIn(e.fake, c.chat)) > n })
		got := messagesIn(e.fake, c.chat)[n].Text
		for _, w := range c.want {
			if !strings.Contains(got, telegram.Escape(w)) && !strings.Contains(got, "`"+w+"`") {
				t.Errorf("/approvals by %d in %d = %q, want %s", c.user, c.chat, got, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) || strings.Contains(got, telegram.Escape(w)) {
				t.Errorf("/approvals by %d in %d = %q lists %s", c.user, c.chat, got, w)
			}
		}
	}
}

// /run of a routine with callers runs only for them (deploy-prod: ana).
func TestRunRoutineCallers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	for i, c := range []struct {
		user int64
		want string
	}{
		{bobID, "You may not run routine `deploy-prod`: not among the routine's callers"},
		{anaID, "Started routine `deploy-prod`"},
	} {
		n := len(messagesIn(e.fake, groupID))
		command(t, e, fmt.Sprint(815000300+i), c.user, groupID, "/run deploy-prod")
		waitFor(t, e.fake, "the /run answer", func() bool { return len(messagesIn(e.fake, groupID)) > n })
		if got := messagesIn(e.fake, groupID)[n].Text; !strings.Contains(got, c.want) {
			t.Errorf("/run deploy-prod by %d = %q, want %q", c.user, got, c.want)
		}
	}
	e.routines.mu.Lock()
	defer e.routines.mu.Unlock()
	if want := "deploy-prod||" + principal(anaID) + "|telegram:" + fmt.Sprint(groupID); len(e.routines.triggered) != 1 || e.routines.triggered[0] != want {
		t.Errorf("triggered = %q, want [%s]", e.routines.triggered, want)
	}
}

// /routines offers only what the asker may run (deploy-prod: ana only).
func TestRoutinesListsWhatTheAskerMayRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	for i, c := range []struct {
		user        int64
		deployShown bool
	}{{bobID, false}, {anaID, true}} {
		n := len(messagesIn(e.fake, groupID))
		command(t, e, fmt.Sprint(815000400+i), c.user, groupID, "/routines")
		waitFor(t, e.fake, "the /routines answer", func() bool { return len(messagesIn(e.fake, groupID)) > n })
		got := messagesIn(e.fake, groupID)[n].Text
		if !strings.Contains(got, "`daily-report`") || strings.Contains(got, "`deploy-prod`") != c.deployShown {
			t.Errorf("/routines by %d = %q; want daily-report, and deploy-prod shown %t", c.user, got, c.deployShown)
		}
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	if code := e.post(t, secret, payload(t, "command_run.json")); code != http.StatusOK {
		t.Fatalf("got %d", code)
	}
	waitFor(t, e.fake, "the /run answer", func() bool { return len(messagesIn(e.fake, groupID)) == 1 })
	if got := messagesIn(e.fake, groupID)[0].Text; !strings.Contains(got, "Started routine `daily-report`") {
		t.Fatalf("/run answered %q", got)
	}
	e.routines.mu.Lock()
	trig := e.routines.triggered
	e.routines.mu.Unlock()
	// The routine's run is bob's: his principal id.
	if len(trig) != 1 || trig[0] != "daily-report|for web|"+principal(bobID)+"|telegram:-1001234567890" {
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
	if acts := e.fake.Actions(); !slices.Contains(acts, "5550003 typing") {
		t.Errorf("chat actions = %q, want typing in the chat while the agent worked", acts)
	}
}

// A live message someone deleted before the answer was ready: the answer
// is posted anew, not lost.
func TestDeletedLiveReplyIsPostedAnew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "", 20*time.Millisecond)
	body := strings.NewReplacer("5550001", "5550003", "815000001", "815000098").Replace(string(payload(t, "private_message.json")))
	if code := e.post(t, secret, []byte(body)); code != http.StatusOK {
		t.Fatalf("got %d", code)
	}
	waitFor(t, e.fake, "the live message", func() bool {
		ms := messagesIn(e.fake, 5550003)
		return len(ms) == 1 && ms[0].Text == "partial answer"
	})
	e.fake.Delete(5550003, messagesIn(e.fake, 5550003)[0].ID)
	close(e.release)
	waitFor(t, e.fake, "the answer posted anew", func() bool {
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
