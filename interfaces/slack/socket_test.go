package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// socketWait bounds every wait on the fake, so a broken client fails the
// test instead of hanging it; nothing is asserted about how long things take.
const socketWait = 10 * time.Second

// testdataParser knows the bot of the samples in testdata/.
var testdataParser = slack.Parser{BotUserID: "U0LAN0Z89", BotID: "B0AGENTGT"}

// fakeEngine is a Submitter that does what SubmitFunc says.
type fakeEngine struct {
	SubmitFunc func(ctx context.Context, req core.SubmitRequest) (core.Run, error)
}

func (e fakeEngine) Submit(ctx context.Context, req core.SubmitRequest) (core.Run, error) {
	return e.SubmitFunc(ctx, req)
}

// noSessions knows no session.
type noSessions struct{}

func (noSessions) GetSession(context.Context, string) (core.Session, error) {
	return core.Session{}, core.ErrNotFound
}

// fakeDispatcher is a Dispatcher that records the requests and answers with
// what DispatchFunc says.
type fakeDispatcher struct {
	DispatchFunc func(req slack.Request) (any, error)
	mu           sync.Mutex
	got          []slack.Request
}

func (d *fakeDispatcher) Dispatch(_ context.Context, req slack.Request) (any, error) {
	d.mu.Lock()
	d.got = append(d.got, req)
	d.mu.Unlock()
	return d.DispatchFunc(req)
}

func (d *fakeDispatcher) requests() []slack.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]slack.Request(nil), d.got...)
}

// gatedInbox is an inbox on SQLite whose appends first ask gate: an
// error fails the append, and gate may block it.
type gatedInbox struct {
	*sqlite.DB
	gate func(msgs []core.InboxMessage) error
}

func (g gatedInbox) AppendInbox(ctx context.Context, msgs []core.InboxMessage) (int, error) {
	if err := g.gate(msgs); err != nil {
		return 0, err
	}
	return g.DB.AppendInbox(ctx, msgs)
}

// handlerWith is a running Handler for the testdata samples whose inbox
// asks gate before it stores; its engine accepts every run.
func handlerWith(t *testing.T, gate func(msgs []core.InboxMessage) error) *slack.Handler {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng := fakeEngine{func(context.Context, core.SubmitRequest) (core.Run, error) { return core.Run{ID: "run_1"}, nil }}
	h, err := slack.NewHandler(slack.HandlerConfig{
		Threads: chat.Threads{Sessions: noSessions{}},
		Intake:  chat.Intake{Engine: eng, Inbox: gatedInbox{db, gate}, DefaultAgent: "helper"}, SigningSecret: secret, Parser: testdataParser,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// startSocket runs a Socket Mode client configured by cfg against fake until
// the test ends, and waits for its first connection.
func startSocket(t *testing.T, fake *slacktest.Server, cfg slack.SocketConfig) {
	t.Helper()
	cfg.AppToken, cfg.APIURL = fake.AppToken, fake.URL
	sock, err := slack.NewSocket(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sock.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start after the context ended = %v, want nil", err)
		}
	})
	if !fake.SocketConnected(1, socketWait) {
		t.Fatal("the client did not connect")
	}
}

func readPayload(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantAck(t *testing.T, fake *slacktest.Server, envelopeID string) json.RawMessage {
	t.Helper()
	payload, ok := fake.SocketAck(envelopeID, socketWait)
	if !ok {
		t.Fatalf("envelope %s was not acknowledged", envelopeID)
	}
	return payload
}

// TestSocketModeAcksOnlyOnceStored: an envelope is acknowledged once its
// message is durable in the inbox, not before.
func TestSocketModeAcksOnlyOnceStored(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	appending, release := make(chan []core.InboxMessage, 1), make(chan struct{})
	startSocket(t, fake, slack.SocketConfig{Dispatcher: handlerWith(t, func(msgs []core.InboxMessage) error {
		appending <- slices.Clone(msgs) // the writer reuses its batch
		<-release
		return nil
	})})

	id := fake.SocketSend("events_api", readPayload(t, "app_mention.json"))
	var msgs []core.InboxMessage
	select {
	case msgs = <-appending:
	case <-time.After(socketWait):
		t.Fatal("the app_mention envelope stored nothing")
	}
	// The append has not returned yet: nothing may be acknowledged.
	if acks := fake.SocketAcks(); len(acks) != 0 {
		t.Fatalf("acks before the message was stored: %+v", acks)
	}
	close(release)
	if payload := wantAck(t, fake, id); payload != nil {
		t.Errorf("ack payload = %s, want none", payload)
	}
	if len(msgs) != 1 || msgs[0].Key != "msg:C123ABC456:1515449522.000016" || !strings.Contains(string(msgs[0].Payload), "what is the status of the deploy?") {
		t.Errorf("stored %+v", msgs)
	}
}

func TestSocketModeRedeliveryStartsNoSecondRun(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	startSocket(t, g.slack, slack.SocketConfig{Dispatcher: g.h.(*slack.Handler)})
	const ts = "1700000005.000100"
	first := g.slack.SocketSend("events_api", json.RawMessage(event("Ev5", "app_mention", "C1", "U1", mention("deploy?"), ts, "", "")))
	again := g.slack.SocketRetry(first) // retry_attempt 1, as if the first ack was late
	wantAck(t, g.slack, first)
	wantAck(t, g.slack, again)

	if got := g.waitReplies(t, "C1", ts, 1); got[0].Text != "helper saw 1: deploy?" {
		t.Errorf("reply = %q", got[0].Text)
	}
	g.settle(t)
	if n := g.runs(t); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}

func TestSocketModeDispatchErrorIsNotAcked(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	var mu sync.Mutex
	var keys []string
	startSocket(t, fake, slack.SocketConfig{Dispatcher: handlerWith(t, func(msgs []core.InboxMessage) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			keys = append(keys, m.Key)
		}
		if len(keys) == 1 {
			return errors.New("store unavailable")
		}
		return nil
	})})

	failed := fake.SocketSend("events_api", json.RawMessage(event("Ev1", "app_mention", "C1", "U1", mention("one"), "1700000006.000100", "", "")))
	next := fake.SocketSend("events_api", json.RawMessage(event("Ev2", "app_mention", "C1", "U1", mention("two"), "1700000006.000200", "", "")))
	wantAck(t, fake, next)
	// Envelopes are handled, and acknowledged, in the order they came: had
	// the failed one been acknowledged, its ack would be here by now.
	for _, a := range fake.SocketAcks() {
		if a.EnvelopeID == failed {
			t.Fatal("the envelope whose message could not be stored was acknowledged")
		}
	}
	wantAck(t, fake, fake.SocketRetry(failed))
	mu.Lock()
	defer mu.Unlock()
	want := []string{"msg:C1:1700000006.000100", "msg:C1:1700000006.000200", "msg:C1:1700000006.000100"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("stored %v, want %v", keys, want)
	}
}

func TestSocketModeReconnectsWhenSlackAsks(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	d := &fakeDispatcher{DispatchFunc: func(slack.Request) (any, error) { return nil, nil }}
	startSocket(t, fake, slack.SocketConfig{Dispatcher: d, Parser: slack.Parser{BotUserID: slacktest.DefaultUserID}})

	wantAck(t, fake, fake.SocketSend("events_api", json.RawMessage(event("Ev1", "app_mention", "C1", "U1", mention("before"), "1700000007.000100", "", ""))))
	fake.SocketDisconnect()
	if !fake.SocketConnected(2, socketWait) {
		t.Fatal("the client did not reconnect after the disconnect envelope")
	}
	wantAck(t, fake, fake.SocketSend("events_api", json.RawMessage(event("Ev2", "app_mention", "C1", "U1", mention("after"), "1700000007.000200", "", ""))))

	if n := len(fake.Calls("apps.connections.open")); n != 2 {
		t.Errorf("apps.connections.open calls = %d, want 2: a fresh URL for each connection", n)
	}
	var texts []string
	for _, r := range d.requests() {
		texts = append(texts, r.Message.Text)
	}
	if strings.Join(texts, " ") != "before after" {
		t.Errorf("dispatched %q, want before and after", texts)
	}
}

func TestSocketModeEnvelopes(t *testing.T) {
	t.Parallel()
	reply := map[string]any{"response_type": "ephemeral", "text": "2 routines"}
	for _, tc := range []struct {
		name     string
		typ      string
		payload  json.RawMessage
		answer   any    // what Dispatch returns
		wantKey  string // the DedupeKey dispatched; "" when nothing is
		wantKind slack.Kind
		wantAck  string // the ack's payload; "" for none
	}{
		{name: "app mention", typ: "events_api", payload: readPayload(t, "app_mention.json"),
			wantKey: "msg:C123ABC456:1515449522.000016", wantKind: slack.KindMessage},
		{name: "approve click", typ: "interactive", payload: readPayload(t, "block_actions.json"),
			wantKey: "action:approve:12466734323.1395872398.8e08c6ea8bf9fc4e7a0e7a4b0b5dcd0a", wantKind: slack.KindAction},
		{name: "slash command answered in the ack", typ: "slash_commands", payload: readPayload(t, "slash_command_socket.json"), answer: reply,
			wantKey: "command:13345224609.738474920.8088930838d88f008e1", wantKind: slack.KindCommand,
			wantAck: `{"response_type":"ephemeral","text":"2 routines"}`},
		{name: "event type newer than slack-go", typ: "events_api", wantKind: slack.KindIgnored,
			payload: json.RawMessage(`{"type":"event_callback","team_id":"T1","event_id":"Ev9","event":{"type":"a_future_event","event_ts":"1700000008.000100"}}`)},
		{name: "malformed: acknowledged, not dispatched", typ: "events_api",
			payload: json.RawMessage(`{"type":"event_callback","team_id":"T1"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := slacktest.New(t)
			d := &fakeDispatcher{DispatchFunc: func(slack.Request) (any, error) { return tc.answer, nil }}
			startSocket(t, fake, slack.SocketConfig{Dispatcher: d, Parser: testdataParser})

			ack := wantAck(t, fake, fake.SocketSend(tc.typ, tc.payload))
			if string(ack) != tc.wantAck {
				t.Errorf("ack payload = %s, want %q", ack, tc.wantAck)
			}
			got := d.requests()
			switch {
			case tc.name == "malformed: acknowledged, not dispatched":
				if len(got) != 0 {
					t.Errorf("dispatched %+v, want nothing", got)
				}
			case len(got) != 1 || got[0].Kind != tc.wantKind || got[0].DedupeKey != tc.wantKey:
				t.Errorf("dispatched %+v, want one %v with key %q", got, tc.wantKind, tc.wantKey)
			}
		})
	}
}

func TestSocketModeRefusedAppToken(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	sock, err := slack.NewSocket(slack.SocketConfig{AppToken: "xapp-1-revoked", APIURL: fake.URL,
		Dispatcher: &fakeDispatcher{DispatchFunc: func(slack.Request) (any, error) { return nil, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	err = sock.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") || !strings.Contains(err.Error(), "SLACK_APP_TOKEN") {
		t.Errorf("Start = %v, want invalid_auth and what to check", err)
	}
}

func TestNewSocketChecksConfig(t *testing.T) {
	t.Parallel()
	d := &fakeDispatcher{}
	for _, tc := range []struct {
		name string
		cfg  slack.SocketConfig
		want string
	}{
		{"no token", slack.SocketConfig{Dispatcher: d}, "set SLACK_APP_TOKEN to the app's xapp-"},
		{"bot token", slack.SocketConfig{AppToken: "xoxb-1", Dispatcher: d}, "set SLACK_APP_TOKEN to the app's xapp-"},
		{"no dispatcher", slack.SocketConfig{AppToken: "xapp-1"}, "dispatcher"},
		{"bad API URL", slack.SocketConfig{AppToken: "xapp-1", APIURL: "slack.com", Dispatcher: d}, "SLACK_API_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := slack.NewSocket(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewSocket = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
