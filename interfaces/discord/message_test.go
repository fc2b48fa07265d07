package discord_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/discord"
	"github.com/agentgate/agentgate/interfaces/discord/discordtest"
)

// gateway connects e's handler to the fake Gateway until the test ends.
func (e *env) gateway(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.h.RunGateway(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	id := e.fake.Identified(10 * time.Second)
	if id == nil {
		t.Fatal("the gateway did not identify")
	}
	want := discord.Intents
	if got := id["intents"]; got != float64(want) {
		t.Errorf("identify intents = %v, want %d (guilds, guild and direct messages, message content)", got, want)
	}
	if id["token"] != "Bot "+discordtest.Token {
		t.Errorf("identify token = %v", id["token"])
	}
}

func (e *env) waitRuns(t *testing.T, n int) []core.SubmitRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.runs.all()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("runs = %+v, want %d", e.runs.all(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return e.runs.all()
}

func TestGatewayMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gateway(t)
	const user = "500000000000000009"
	// Not for the bot: dropped.
	e.fake.Dispatch("MESSAGE_CREATE", e.fake.MessageCreate(channel, discordtest.GuildID, user, "lunch?", false))
	// A mention in a channel opens a thread on the message.
	m := e.fake.MessageCreate(channel, discordtest.GuildID, user, "deploy web please", true)
	e.fake.Dispatch("MESSAGE_CREATE", m)
	runs := e.waitRuns(t, 1)
	id := m["id"].(string)
	r := runs[0]
	if r.Input != "deploy web please" || r.AgentID != "deployer" || r.UserID != user || r.DedupeKey != "msg:"+id {
		t.Errorf("run = %+v", r)
	}
	if r.Binding != (core.Binding{Platform: chat.PlatformDiscord, Workspace: discordtest.GuildID, Channel: id}) {
		t.Errorf("binding = %+v, want the thread opened on the message", r.Binding)
	}
	if got := e.fake.Threads()[id]; got != channel {
		t.Errorf("threads = %v, want %s on %s", e.fake.Threads(), id, channel)
	}
	// A mention in that thread continues its session.
	e.fake.Dispatch("MESSAGE_CREATE", e.fake.MessageCreate(id, discordtest.GuildID, user, "and api", true))
	runs = e.waitRuns(t, 2)
	if runs[1].SessionID != r.SessionID || runs[1].Binding.Channel != id || runs[1].AgentID != "deployer" {
		t.Errorf("follow-up run = %+v, want session %s", runs[1], r.SessionID)
	}
	// A direct message: one session per DM channel.
	const dm = "1300000000000000042"
	e.fake.Dispatch("MESSAGE_CREATE", e.fake.MessageCreate(dm, "", user, "hi", false))
	runs = e.waitRuns(t, 3)
	if runs[2].AgentID != "ops" || runs[2].Binding.Channel != dm || runs[2].Input != "hi" {
		t.Errorf("DM run = %+v", runs[2])
	}
	// A bot's message is ignored.
	bot := e.fake.MessageCreate(channel, discordtest.GuildID, user, "beep", true)
	bot["author"].(map[string]any)["bot"] = true
	e.fake.Dispatch("MESSAGE_CREATE", bot)

	// An interaction over the Gateway is answered with a REST callback.
	in := e.fake.Interaction(1, channel, user, nil, nil)
	e.fake.Dispatch("INTERACTION_CREATE", in)
	if !e.fake.Wait(10*time.Second, func() bool { return len(e.fake.Responses()) == 1 }) {
		t.Fatal("no interaction callback")
	}
	if c := e.fake.Responses()[0]; c.Path != fmt.Sprintf("/interactions/%s/%s/callback", in["id"], in["token"]) || c.Body["type"] != float64(1) {
		t.Errorf("callback = %+v", c)
	}
	if n := len(e.runs.all()); n != 3 {
		t.Errorf("%d runs, want 3", n)
	}
}

// newReplier returns the reply pipeline with Discord's replier; live
// answers show every 10ms (chat.Live's pacing is tested in package chat).
func newReplier(t *testing.T, e *env) *chat.Replies {
	t.Helper()
	r, err := discord.NewNotifier(chat.NotifierConfig[*discord.Client]{Outbox: e.db, Client: e.client})
	if err != nil {
		t.Fatal(err)
	}
	p, err := chat.NewReplies(chat.RepliesConfig{Store: e.db, Platforms: map[string]chat.Platform{chat.PlatformDiscord: r},
		LiveInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) chatRun(t *testing.T) core.Run {
	t.Helper()
	sid := core.NewID("ses")
	run, err := e.db.CreateRun(t.Context(), core.NewRun{
		Session: core.Session{ID: sid, AgentID: "ops", Binding: core.Binding{Platform: chat.PlatformDiscord, Workspace: discordtest.GuildID, Channel: thread}},
		Run:     core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "ops", Type: core.RunTypeChat, Input: "hi", CreatedAt: time.Now()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func (e *env) finish(t *testing.T, r *chat.Replies, run core.Run, answer string) {
	t.Helper()
	done, err := e.db.FinishRun(t.Context(), run.ID, "", core.Finish{Status: core.RunCompleted, Output: answer, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a retried job posts nothing twice
		if err := r.Handle(t.Context(), r.OnFinish(done, done.Status)[0]); err != nil {
			t.Fatalf("reply job: %v", err)
		}
	}
}

func TestReplySplitAt2000(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReplier(t, e)
	e.fake.Limit("POST /channels/"+thread+"/messages", 1) // a 429 first: retried after retry_after
	answer := strings.Repeat("word ", 300) + "\n\n" + strings.Repeat("y ", 900)
	e.finish(t, r, e.chatRun(t), answer)
	msgs := e.fake.Messages(thread)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	posts := 0
	for _, c := range e.fake.Calls() {
		if c.Method == "POST" && c.Path == "/channels/"+thread+"/messages" {
			posts++
		}
	}
	if posts != 3 {
		t.Errorf("%d POSTs, want 3: the first answered 429, then retried after retry_after", posts)
	}
	var joined []string
	for _, m := range msgs {
		if n := len([]rune(m.Content)); n > discord.MaxMessage {
			t.Errorf("message of %d characters", n)
		}
		joined = append(joined, m.Content)
	}
	if strings.Join(strings.Fields(strings.Join(joined, " ")), " ") != strings.Join(strings.Fields(answer), " ") {
		t.Error("the parts do not make the answer")
	}
}

func TestLiveAnswerEdited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReplier(t, e)
	run := e.chatRun(t)
	l := r.Progress(run)
	l.Delta("Hello")
	if !e.fake.Wait(10*time.Second, func() bool { m := e.fake.Messages(thread); return len(m) == 1 && m[0].Content == "Hello" }) {
		t.Fatalf("live message = %+v", e.fake.Messages(thread))
	}
	l.Delta(" world")
	if !e.fake.Wait(10*time.Second, func() bool { m := e.fake.Messages(thread); return m[0].Content == "Hello world" }) {
		t.Fatalf("live message = %+v", e.fake.Messages(thread))
	}
	l.Close(core.ProgressFinished)
	typing := 0
	for _, c := range e.fake.Calls() {
		if c.Method == "POST" && c.Path == "/channels/"+thread+"/typing" {
			typing++
		}
	}
	if typing == 0 {
		t.Error("no typing indicator while the answer was written")
	}
	e.finish(t, r, run, "Hello world, done.")
	msgs := e.fake.Messages(thread)
	if len(msgs) != 1 || msgs[0].Content != "Hello world, done." || msgs[0].Edits != 2 {
		t.Errorf("messages = %+v, want the live message edited into the answer", msgs)
	}
}

// A live message someone deleted before the answer was ready: the answer
// is posted anew, once, not lost.
func TestDeletedLiveAnswerIsPostedAnew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReplier(t, e)
	run := e.chatRun(t)
	l := r.Progress(run)
	l.Delta("Hello")
	if !e.fake.Wait(10*time.Second, func() bool { return len(e.fake.Messages(thread)) == 1 }) {
		t.Fatalf("live message = %+v", e.fake.Messages(thread))
	}
	l.Close(core.ProgressFinished)
	e.fake.Delete(e.fake.Messages(thread)[0].ID)
	e.finish(t, r, run, "Hello world, done.") // twice: a retried job posts nothing again
	if msgs := e.fake.Messages(thread); len(msgs) != 1 || msgs[0].Content != "Hello world, done." {
		t.Errorf("messages = %+v, want the answer posted anew, once", msgs)
	}
}

func TestCommandAnswerAfterTokenLife(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.fake.Interaction(2, channel, ana, nil, discordtest.Command("help", nil))
	late := time.Now().Add(-20 * time.Minute)
	old["id"] = fmt.Sprint((late.UnixMilli() - 1420070400000) << 22)
	if resp := e.post(t, old); resp["type"] != float64(5) {
		t.Fatalf("answer = %v", resp)
	}
	if !e.fake.Wait(10*time.Second, func() bool { return len(e.fake.Messages(channel)) == 1 }) {
		t.Fatalf("no message in the channel; follow-ups %v", e.fake.Followups())
	}
	if len(e.fake.Followups()) != 0 || !strings.Contains(e.fake.Messages(channel)[0].Content, "/agentgate run") {
		t.Errorf("messages %+v, follow-ups %+v", e.fake.Messages(channel), e.fake.Followups())
	}
}

func TestLivePausedForApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newReplier(t, e)
	l := r.Progress(e.chatRun(t))
	l.Delta("Let me deploy that.")
	if !e.fake.Wait(10*time.Second, func() bool { return len(e.fake.Messages(thread)) == 1 }) {
		t.Fatal("no live message")
	}
	l.Close(core.ProgressPaused)
	if m := e.fake.Messages(thread); len(m) != 1 || m[0].Content != "Let me deploy that.\n\n"+chat.NotePaused {
		t.Errorf("messages = %+v, want the live message ended by the waiting note", m)
	}
}

func TestRoutineDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := core.Binding{Platform: chat.PlatformDiscord, Channel: channel}
	text := "**Routine daily-digest**\n\n" + strings.Repeat("All quiet. ", 300)
	for range 2 { // a retried delivery posts nothing twice
		if err := e.notifier.DeliverResult(t.Context(), b, "routine:run_1", text); err != nil {
			t.Fatal(err)
		}
	}
	msgs := e.fake.Messages(channel)
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0].Content, "**Routine daily-digest**") {
		t.Errorf("messages = %d, want the result in 2 parts: %+v", len(msgs), msgs)
	}
}
