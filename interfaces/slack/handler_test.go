package slack_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
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
	db    *sqlite.DB
	slack *slacktest.Server
}

func newGateway(t *testing.T) *gateway {
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
	rep, err := slack.NewReplier(slack.ReplierConfig{Store: db, Client: client, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Logger: log,
		Agents: map[string]*core.Agent{
			"helper": {ID: "helper", Model: echoModel{"helper"}},
			"ops":    {ID: "ops", Model: echoModel{"ops"}},
		},
		OnFinish: rep.OnFinish, Handlers: rep.Handlers()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Start(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	h, err := slack.NewHandler(slack.HandlerConfig{
		SigningSecret: secret, Engine: eng, Sessions: db, Logger: log,
		Parser:       slack.Parser{BotUserID: slacktest.DefaultUserID, BotID: slacktest.DefaultBotID},
		DefaultAgent: "helper", Channels: map[string]string{"COPS": "ops"},
		ThreadFollowUps: true, IgnoreBots: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &gateway{h: h, db: db, slack: fake}
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

func TestIgnoresBotsAndUnaddressedMessages(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for _, body := range []string{
		event("Ev1", "message", "C1", slacktest.DefaultUserID, "my own answer", "1700000002.000100", "", slacktest.DefaultBotID),
		event("Ev2", "message", "C1", "U9", mention("another bot"), "1700000002.000200", "", "B0OTHER"),
		event("Ev3", "message", "C1", "U1", "just chatting", "1700000002.000300", "", ""),
		event("Ev4", "message", "C1", "U1", "a thread without the bot", "1700000002.000400", "1700000000.000001", ""),
		event("Ev5", "reaction_added", "C1", "U1", "", "1700000002.000500", "", ""),
	} {
		if code, _ := g.send(t, body, 0); code != http.StatusOK {
			t.Fatalf("status %d for %s", code, body)
		}
	}
	if n := g.runs(t); n != 0 {
		t.Errorf("runs = %d, want 0", n)
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
