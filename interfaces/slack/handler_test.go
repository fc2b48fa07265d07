package slack_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/slack"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
	"github.com/agentgate/agentgate/store/sqlite"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

// echoModel answers with its agent's name, how many messages it saw and the
// last one.
type echoModel struct{ name string }

func (m echoModel) Generate(_ context.Context, req core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1].Content
	return core.ModelResponse{Text: fmt.Sprintf("%s saw %d: %s", m.name, len(req.Messages), last)}, nil
}

type gateway struct {
	h     http.Handler
	cfg   slack.HandlerConfig // h's
	db    *sqlite.DB
	slack *slacktest.Server
}

// newGateway starts a handler on SQLite (with its inbox) and an engine; opts
// change the handler's config.
func newGateway(t *testing.T, opts ...func(*slack.HandlerConfig)) *gateway {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fake := slacktest.New(t)
	client, err := slack.NewClient(slack.ClientConfig{Token: fake.Token, APIURL: fake.URL, ChannelInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := slack.NewNotifier(chat.NotifierConfig[*slack.Client]{Outbox: db, Client: client, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	replies, err := chat.NewReplies(chat.RepliesConfig{Store: db, Platforms: map[string]chat.Platform{chat.PlatformSlack: rep}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Logger: log,
		Agents: map[string]*core.Agent{
			"helper": {ID: "helper", Model: echoModel{"helper"}},
			"ops":    {ID: "ops", Model: echoModel{"ops"}},
		},
		OnFinish: replies.OnFinish, Handlers: replies.Handlers()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Start(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	cfg := slack.HandlerConfig{
		Threads:       chat.Threads{Sessions: db, Channels: map[string]string{"COPS": "ops", "CGONE": "gone"}, ThreadFollowUps: true, IgnoreBots: true},
		Intake:        chat.Intake{Engine: eng, Logger: log, Inbox: db, DefaultAgent: "helper"},
		SigningSecret: secret,
		Parser:        slack.Parser{BotUserID: slacktest.DefaultUserID, BotID: slacktest.DefaultBotID},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Inbox == nil { // the store and engine of a node whose handler the test makes
		return &gateway{cfg: cfg, db: db, slack: fake}
	}
	h, err := slack.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := h.Start(ctx); err != nil {
			t.Errorf("handler: %v", err)
		}
	})
	return &gateway{h: h, cfg: cfg, db: db, slack: fake}
}

// inbox returns the inbox's messages as "key error" lines, oldest first, and
// how many are still waiting.
func (g *gateway) inbox(t *testing.T) (rows []string, waiting int) {
	t.Helper()
	db, err := sql.Open("sqlite", g.db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := db.QueryContext(t.Context(), `SELECT dedupe_key, error, processed_at IS NULL FROM inbox ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for q.Next() {
		var key, msg string
		var wait bool
		if err := q.Scan(&key, &msg, &wait); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, strings.TrimSpace(key+" "+msg))
		if wait {
			waiting++
		}
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, waiting
}

// send posts a signed body and returns the status and body of the answer.
func (g *gateway) send(t *testing.T, body string, retry int) (int, string) {
	t.Helper()
	req := slacktest.SignedRequest(secret, []byte(body), time.Now())
	if retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", fmt.Sprint(retry))
	}
	rec := httptest.NewRecorder()
	g.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// event is an event_callback body of one message or app_mention event.
func event(id, typ, channel, user, text, ts, threadTS, botID string) string {
	ev := fmt.Sprintf(`{"type":%q,"channel":%q,"user":%q,"text":%q,"ts":%q,"channel_type":"channel"`, typ, channel, user, text, ts)
	if threadTS != "" {
		ev += fmt.Sprintf(`,"thread_ts":%q`, threadTS)
	}
	if botID != "" {
		ev += fmt.Sprintf(`,"bot_id":%q`, botID)
	}
	return fmt.Sprintf(`{"type":"event_callback","team_id":%q,"event_id":%q,"event":%s}}`, slacktest.DefaultTeamID, id, ev)
}

func mention(text string) string { return "<@" + slacktest.DefaultUserID + "> " + text }

// waitReplies waits until the thread has n replies and returns them.
func (g *gateway) waitReplies(t *testing.T, channel, thread string, n int) []slacktest.Message {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := g.slack.Replies(channel, thread)
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("replies in %s/%s = %+v, want %d", channel, thread, got, n)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settle waits until no run is queued or running and no job is waiting.
func (g *gateway) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := g.db.CountRuns(t.Context())
		d, derr := g.db.Depth(t.Context())
		if err == nil && derr == nil && c[core.RunQueued]+c[core.RunRunning] == 0 && d == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("runs did not settle")
}

func (g *gateway) runs(t *testing.T) int64 {
	t.Helper()
	c, err := g.db.CountRuns(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

func TestRejectsUnsignedAndStale(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	body := []byte(event("Ev1", "app_mention", "C1", "U1", mention("hi"), "1700000001.000100", "", ""))
	bad := slacktest.SignedRequest("wrong-secret", body, time.Now())
	stale := slacktest.SignedRequest(secret, body, time.Now().Add(-6*time.Minute))
	unsigned := httptest.NewRequest(http.MethodPost, "/slack/events", strings.NewReader(string(body)))
	for name, req := range map[string]*http.Request{"wrong secret": bad, "stale": stale, "unsigned": unsigned} {
		rec := httptest.NewRecorder()
		g.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: status = %d, want 401", name, rec.Code)
		}
	}
	if n := g.runs(t); n != 0 {
		t.Errorf("runs = %d, want 0", n)
	}
}

// noRead is a request body that must not be read.
type noRead struct{ t *testing.T }

func (b noRead) Read([]byte) (int, error) {
	b.t.Error("the body was read before the signature headers were checked")
	return 0, io.EOF
}

// An unsigned, stale or malformed request is refused before its body is
// read: a request declaring 1 MiB and sending nothing costs its headers.
func TestHeadersCheckedBeforeBody(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	for name, hdr := range map[string][2]string{
		"unsigned":  {"", ""},
		"stale":     {"v0=" + strings.Repeat("ab", 32), strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)},
		"malformed": {"v0=zz", now},
		"version":   {"v1=" + strings.Repeat("ab", 32), now},
	} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/slack/events", noRead{t})
		req.ContentLength = slack.MaxBodyBytes
		req.Header.Set(slack.HeaderSignature, hdr[0])
		req.Header.Set(slack.HeaderTimestamp, hdr[1])
		rec := httptest.NewRecorder()
		g.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: status = %d, want 401", name, rec.Code)
		}
	}
}

func TestURLVerification(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	code, body := g.send(t, `{"type":"url_verification","token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`, 0)
	if code != http.StatusOK || body != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("url_verification = %d %q", code, body)
	}
}

func TestMentionAnsweredOnceInThread(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const ts = "1700000001.000100"
	for i, body := range []string{
		event("Ev1", "app_mention", "C1", "U1", mention("what is up?"), ts, "", ""),
		event("Ev1", "app_mention", "C1", "U1", mention("what is up?"), ts, "", ""), // Slack's retry
		event("Ev2", "message", "C1", "U1", mention("what is up?"), ts, "", ""),     // the pair's message event
	} {
		if code, _ := g.send(t, body, i%2); code != http.StatusOK {
			t.Fatalf("event %d: status %d", i, code)
		}
	}
	got := g.waitReplies(t, "C1", ts, 1)
	if got[0].Text != "helper saw 1: what is up?" {
		t.Errorf("reply = %q", got[0].Text)
	}
	g.settle(t)
	if n := g.runs(t); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
	if calls := g.slack.Calls("chat.postMessage"); len(calls) != 1 || calls[0].Args["thread_ts"] != ts {
		t.Errorf("chat.postMessage calls = %+v, want one in thread %s", calls, ts)
	}
}

// failingEngine fails every Submit, as a store that went away would.
type failingEngine struct{ called chan struct{} }

func (e failingEngine) Submit(context.Context, core.SubmitRequest) (core.Run, error) {
	select {
	case e.called <- struct{}{}:
	default:
	}
	return core.Run{}, errors.New("store unreachable")
}

// TestInboxSurvivesRestart: a message acknowledged by a node whose
// processor could not start its run stays in the inbox, and the next node
// on the store starts it.
func TestInboxSurvivesRestart(t *testing.T) {
	t.Parallel()
	g := newGateway(t, func(c *slack.HandlerConfig) { c.Inbox = nil }) // the engine and store of the next node
	cfg := g.cfg
	cfg.Inbox, cfg.NodeID = g.db, "node-1"
	broken := failingEngine{called: make(chan struct{}, 1)}
	cfg.Engine = broken
	first, err := slack.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- first.Start(ctx) }()
	const ts = "1700000007.000100"
	req := slacktest.SignedRequest(secret, []byte(event("Ev1", "app_mention", "C1", "U1", mention("still there?"), ts, "", "")), time.Now())
	rec := httptest.NewRecorder()
	first.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	<-broken.called
	stop()
	if err := <-stopped; err != nil {
		t.Fatalf("first node: %v", err)
	}
	if _, waiting := g.inbox(t); waiting != 1 {
		t.Fatalf("waiting messages after the first node stopped = %d, want 1", waiting)
	}

	next := g.cfg
	next.Inbox, next.NodeID = g.db, "node-2"
	h, err := slack.NewHandler(next)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop = context.WithCancel(t.Context())
	go func() { stopped <- h.Start(ctx) }()
	t.Cleanup(func() { stop(); <-stopped })
	if got := g.waitReplies(t, "C1", ts, 1); got[0].Text != "helper saw 1: still there?" {
		t.Errorf("reply = %q", got[0].Text)
	}
}

func TestIgnoresBotsAndUnaddressedMessages(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for _, body := range []string{
		event("Ev1", "message", "C1", slacktest.DefaultUserID, "my own answer", "1700000002.000100", "", slacktest.DefaultBotID),
		event("Ev2", "message", "C1", "U9", mention("another bot"), "1700000002.000200", "", "B0OTHER"),
		event("Ev3", "message", "C1", "U1", "just chatting", "1700000002.000300", "", ""),
		event("Ev4", "message", "C1", "U1", "a thread without the bot", "1700000002.000400", "1700000000.000001", ""),
		event("Ev5", "reaction_added", "C1", "U1", "", "1700000002.000500", "", ""),
		event("Ev6", "app_mention", "C1", "U1", mention(""), "1700000002.000600", "", ""),
		// The last one is for the bot: once it is answered, the others had their turn.
		event("Ev7", "app_mention", "C1", "U1", mention("hello"), "1700000002.000700", "", ""),
	} {
		if code, _ := g.send(t, body, 0); code != http.StatusOK {
			t.Fatalf("status %d for %s", code, body)
		}
	}
	g.waitReplies(t, "C1", "1700000002.000700", 1)
	if n := g.runs(t); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
	// Only messages that may start a run are stored; the thread follow-up is
	// dropped by the processor, which knows the bot's threads.
	if rows, waiting := g.inbox(t); !slices.Equal(rows, []string{"msg:C1:1700000002.000400", "msg:C1:1700000002.000700"}) || waiting != 0 {
		t.Errorf("inbox = %q with %d waiting, want the thread reply and the mention, processed", rows, waiting)
	}
}

// TestUnprocessableMessage: a message whose run cannot start (its channel
// routes to an agent that does not exist) is acknowledged, marked failed in
// the inbox and not retried; the messages after it are answered.
func TestUnprocessableMessage(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const ts = "1700000005.000100"
	if code, _ := g.send(t, event("Ev1", "app_mention", "CGONE", "U1", mention("anyone?"), ts, "", ""), 0); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	g.send(t, event("Ev2", "app_mention", "C1", "U1", mention("hello"), "1700000005.000200", "", ""), 0)
	g.waitReplies(t, "C1", "1700000005.000200", 1)
	rows, waiting := g.inbox(t)
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "msg:CGONE:"+ts+" ") || !strings.Contains(rows[0], `agent "gone"`) || waiting != 0 {
		t.Errorf("inbox = %q with %d waiting, want the CGONE message failed naming the agent", rows, waiting)
	}
	if n := g.runs(t); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}

func TestThreadFollowUpContinuesSession(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const root = "1700000003.000100"
	g.send(t, event("Ev1", "app_mention", "C1", "U1", mention("first"), root, "", ""), 0)
	g.waitReplies(t, "C1", root, 1)
	g.settle(t)
	// Another person follows up in the thread, without a mention.
	g.send(t, event("Ev2", "message", "C1", "U2", "second", "1700000003.000200", root, ""), 0)
	got := g.waitReplies(t, "C1", root, 2)
	// The second run sees the first run's input and answer, then its own.
	if got[1].Text != "helper saw 3: second" {
		t.Errorf("follow-up reply = %q", got[1].Text)
	}
}

func TestChannelRouting(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const ts = "1700000004.000100"
	g.send(t, event("Ev1", "app_mention", "COPS", "U1", mention("status?"), ts, "", ""), 0)
	if got := g.waitReplies(t, "COPS", ts, 1); got[0].Text != "ops saw 1: status?" {
		t.Errorf("reply = %q, want the ops agent's", got[0].Text)
	}
}
