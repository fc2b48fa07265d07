package slack

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
	"github.com/agentgate/agentgate/store/sqlite"
)

const (
	liveChannel = "C0LIVE"
	liveThread  = "1700000000.000100"
)

// liveStore is the SQLite store with a number of pauses for approval added
// to every journal read, to put a run in a later segment.
type liveStore struct {
	*sqlite.DB
	pauses atomic.Int32
}

func (s *liveStore) Events(ctx context.Context, id string, after int64, limit int) ([]core.Event, error) {
	evs, err := s.DB.Events(ctx, id, after, limit)
	for range s.pauses.Load() {
		evs = append(evs, core.NewEvent(core.EventApprovalRequested, core.ApprovalRequested{}))
	}
	return evs, err
}

// liveBench is a replier on a fake Slack whose live replies tick by hand.
type liveBench struct {
	t     *testing.T
	fake  *slacktest.Server
	store *liveStore
	ticks chan time.Time
}

func newLiveBench(t *testing.T) *liveBench {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &liveBench{t: t, fake: slacktest.New(t), store: &liveStore{DB: db}, ticks: make(chan time.Time)}
}

// replier returns a replier of the bench, as one node of the gateway. Its
// client waits out the channel limiter on a fake clock.
func (b *liveBench) replier() *node {
	b.t.Helper()
	client, _ := newTestClient(b.t, b.fake, ClientConfig{})
	r, err := NewNotifier(chat.NotifierConfig[*Client]{Outbox: b.store, Client: client})
	if err != nil {
		b.t.Fatal(err)
	}
	p, err := chat.NewReplies(chat.RepliesConfig{Store: b.store, Platforms: map[string]chat.Platform{chat.PlatformSlack: r},
		Ticker: func(time.Duration) (<-chan time.Time, func()) { return b.ticks, func() {} }})
	if err != nil {
		b.t.Fatal(err)
	}
	return &node{Replies: p, slack: r}
}

// node is one node of the gateway: the reply pipeline with Slack's replier.
type node struct {
	*chat.Replies
	slack *Notifier
}

// run creates a chat run in the Slack thread of the bench.
func (b *liveBench) run() core.Run {
	b.t.Helper()
	sid := core.NewID("ses")
	run, err := b.store.CreateRun(b.t.Context(), core.NewRun{
		Session: core.Session{ID: sid, AgentID: "helper", UserID: "U0ASKER",
			Binding: core.Binding{Platform: chat.PlatformSlack, Workspace: "T0TEAM", Channel: liveChannel, Thread: liveThread}},
		Run: core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "helper", UserID: "U0ASKER",
			Type: core.RunTypeChat, Input: "hi", CreatedAt: time.Now()},
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return run
}

// tick paces the live reply l (nil: the one running) once and returns when
// it has acted on it: the second tick is only taken once the loop waits
// again (and finds nothing new to show).
func (b *liveBench) tick(l core.ProgressSink) {
	b.t.Helper()
	var done <-chan struct{}
	if l != nil {
		done = l.(*chat.Live).Done()
	}
	for range 2 {
		select {
		case b.ticks <- time.Time{}:
		case <-done:
			return
		case <-time.After(10 * time.Second):
			b.t.Fatal("the live reply did not take the tick")
		}
	}
}

// show starts r's live reply of run, writes text and lets one tick pass.
func (b *liveBench) show(r *node, run core.Run, text string) core.ProgressSink {
	b.t.Helper()
	l := r.Progress(run)
	if text != "" {
		l.Delta(text)
	}
	b.tick(l)
	return l
}

// finish completes run with answer and runs its reply job on r.
func (b *liveBench) finish(r *node, run core.Run, answer string) {
	b.t.Helper()
	done, err := b.store.FinishRun(b.t.Context(), run.ID, "", core.Finish{Status: core.RunCompleted, Output: answer, At: time.Now()})
	if err != nil {
		b.t.Fatal(err)
	}
	if err := r.Handle(b.t.Context(), r.OnFinish(done, done.Status)[0]); err != nil {
		b.t.Fatalf("reply job: %v", err)
	}
}

// thread returns the bot's messages in the bench's thread.
func (b *liveBench) thread() []slacktest.Message { return b.fake.Replies(liveChannel, liveThread) }

func (b *liveBench) calls(method string) int { return len(b.fake.Calls(method)) }

// wantCalls checks that the fake got n calls of methods in all.
func (b *liveBench) wantCalls(n int, methods ...string) {
	b.t.Helper()
	if got := len(b.fake.Calls(methods...)); got != n {
		b.t.Errorf("%s calls = %d, want %d", strings.Join(methods, " + "), got, n)
	}
}

// mrkdwnOf is the text of the first message of the answer md.
func mrkdwnOf(md string) string {
	text, _ := firstMessage(md)
	return text
}

// wantAnswer checks that the thread holds exactly one message, the answer.
func (b *liveBench) wantAnswer(answer string) slacktest.Message {
	b.t.Helper()
	msgs := b.thread()
	if len(msgs) != 1 {
		b.t.Fatalf("thread = %+v, want one message", msgs)
	}
	want := mrkdwnOf(answer)
	if m := msgs[0]; m.Text != want || m.Streaming || !strings.Contains(string(m.Blocks), `"section"`) {
		b.t.Errorf("message = %+v, want the answer %q in sections, stream ended", m, want)
	}
	return msgs[0]
}

func TestLiveReplyStreamsThenBecomesTheAnswer(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	run := b.run()
	answer := "Hello, **world**: see [the log](https://ci.example/42)."

	l := b.show(r, run, "Hello, ") // the stream starts with the text so far
	starts := b.fake.Calls("chat.startStream")
	if len(starts) != 1 {
		t.Fatalf("startStream calls = %d, want 1", len(starts))
	}
	if a := starts[0].Args; a["thread_ts"] != liveThread || a["recipient_user_id"] != "U0ASKER" || a["recipient_team_id"] != "T0TEAM" || a["markdown_text"] != "Hello, " {
		t.Errorf("startStream args = %v, want the thread, the asker and the text so far", a)
	}
	if st, ok := b.fake.Status(liveChannel, liveThread); !ok || st != thinkingStatus {
		t.Errorf("assistant thread status = %q (set: %v), want %q while the run works", st, ok, thinkingStatus)
	}
	for _, d := range []string{"**wor", "ld**: see ", "[the log](https://ci.example/42)."} {
		l.Delta(d)
	}
	if n := b.calls("chat.appendStream"); n != 0 {
		t.Fatalf("appendStream calls before a tick = %d, want 0", n)
	}
	b.tick(l)
	b.wantCalls(1, "chat.appendStream") // three deltas, one tick
	if msgs := b.thread(); len(msgs) != 1 || msgs[0].Text != answer || !msgs[0].Streaming {
		t.Errorf("streamed = %+v, want the answer's Markdown, still streaming", msgs)
	}
	l.Close(core.ProgressFinished)

	b.finish(r, run, answer)
	b.wantAnswer(answer)
	b.wantCalls(0, "chat.postMessage")
	// A retried reply job changes nothing.
	b.finishAgain(r, run)
	b.wantAnswer(answer)
}

// finishAgain runs run's reply job once more.
func (b *liveBench) finishAgain(r *node, run core.Run) {
	b.t.Helper()
	updates := b.calls("chat.update")
	if err := r.Handle(b.t.Context(), r.OnFinish(run, core.RunCompleted)[0]); err != nil {
		b.t.Fatal(err)
	}
	if n := b.calls("chat.update"); n != updates {
		b.t.Errorf("a retried reply job edited again (%d → %d updates)", updates, n)
	}
}

// TestLiveReplyFallsBackToEditsOncePerTick: where Slack refuses to stream,
// a "Thinking…" message is posted and edited, at most once per tick however
// many deltas arrive.
func TestLiveReplyFallsBackToEditsOncePerTick(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	b.fake.Error("chat.startStream", "not_allowed_token_type", 1)
	run := b.run()

	l := b.show(r, run, "")
	msgs := b.thread()
	if len(msgs) != 1 || msgs[0].Text != thinkingNote || msgs[0].Streaming {
		t.Fatalf("thread = %+v, want the thinking placeholder", msgs)
	}
	ts := msgs[0].TS
	var want strings.Builder
	for round, n := range []int{5, 3, 0, 4} {
		for i := range n {
			d := strings.Repeat("x", i+1) + " "
			l.Delta(d)
			want.WriteString(d)
		}
		before := b.calls("chat.update")
		if b.tick(l); b.calls("chat.update")-before != min(n, 1) {
			t.Fatalf("round %d: %d deltas made %d edits, want %d", round, n, b.calls("chat.update")-before, min(n, 1))
		}
		if m, _ := b.fake.Message(liveChannel, ts); n > 0 && m.Text != mrkdwnOf(want.String()) {
			t.Errorf("round %d: text = %q, want %q", round, m.Text, mrkdwnOf(want.String()))
		}
	}
	b.wantCalls(3, "chat.update") // one per tick with news
	l.Close(core.ProgressFinished)
	b.finish(r, run, "All **done**.")
	if b.wantAnswer("All **done**.").TS != ts {
		t.Error("the answer is not the placeholder edited")
	}

	// The refusal is remembered for the channel: the next run posts at once.
	run2 := b.run()
	b.show(r, run2, "").Close(core.ProgressFinished)
	b.wantCalls(1, "chat.startStream")
}

// TestLiveReplyAfterACrash: a node died while streaming; the node that
// resumes the run takes the message over and the answer replaces it — one
// message, never a second.
func TestLiveReplyAfterACrash(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	run := b.run()
	dead := b.replier()
	b.show(dead, run, "Half an ans").Close(core.ProgressStopped) // the node is gone: nothing more comes from it

	r := b.replier() // another node resumes the run
	l2 := b.show(r, run, "")
	l2.Delta("The whole answer, written again.")
	b.tick(l2)
	if msgs := b.thread(); len(msgs) != 1 || msgs[0].Text != "The whole answer, written again." || msgs[0].Streaming {
		t.Errorf("thread = %+v, want the old stream ended and edited to the new text", msgs)
	}
	l2.Close(core.ProgressFinished)
	b.finish(r, run, "The whole answer.")
	b.wantAnswer("The whole answer.")
	b.wantCalls(1, "chat.startStream", "chat.postMessage")
}

// TestLiveReplyCrashBeforeItsTSWasKnown: whether the live message exists is
// unknown; it can hold no answer text, so the answer is posted, once.
func TestLiveReplyCrashBeforeItsTSWasKnown(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	run := b.run()
	if _, _, err := b.store.ClaimSend(t.Context(), r.slack.LiveKey(run.ID, 0), time.Now()); err != nil {
		t.Fatal(err)
	}
	// The resumed run shows nothing rather than risk a second placeholder.
	b.show(r, run, "text").Close(core.ProgressFinished)
	if n := len(b.fake.Calls()); n != 0 {
		t.Fatalf("calls = %+v, want none", b.fake.Calls())
	}
	b.finish(r, run, "The answer.")
	b.wantAnswer("The answer.")
	b.finishAgain(r, run)
	b.wantCalls(1, "chat.postMessage")
}

// TestLiveReplyPauseEndsTheSegment: a pause for an approval ends the stream
// with a note; after the approval the run shows in a new message, below the
// card, and that one becomes the answer.
func TestLiveReplyPauseEndsTheSegment(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	run := b.run()

	b.show(r, run, "Deploying web.").Close(core.ProgressPaused)
	msgs := b.thread()
	if len(msgs) != 1 || msgs[0].Streaming || msgs[0].Text != "Deploying web.\n\n"+chat.NotePaused {
		t.Fatalf("thread after the pause = %+v, want the stream ended with the note", msgs)
	}

	b.store.pauses.Store(1) // the pause is journaled; the approval comes
	b.show(r, run, "Deployed.").Close(core.ProgressFinished)
	b.finish(r, run, "Deployed **web**.")
	msgs = b.thread()
	if len(msgs) != 2 || msgs[0].Text != "Deploying web.\n\n"+chat.NotePaused || msgs[1].Text != mrkdwnOf("Deployed **web**.") {
		t.Errorf("thread = %+v, want the first segment kept and the second one the answer", msgs)
	}
}

// TestLiveReplyQuickAnswerIsPostedWhole: a run done before the first tick
// never shows live; its answer is posted.
func TestLiveReplyQuickAnswerIsPostedWhole(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	run := b.run()
	l := r.Progress(run)
	l.Delta("Quick.")
	l.Close(core.ProgressFinished)
	b.finish(r, run, "Quick.")
	b.wantAnswer("Quick.")
	b.wantCalls(0, "chat.startStream", "chat.update")
	if r.Progress(core.Run{ID: "run_api", Type: core.RunTypeAPI}) != nil {
		t.Error("an API run got a live reply")
	}
}

// TestLiveReplyStreamsNoMention: mentions the model writes (a user can
// ask for one) reach Slack inert in every streamed call, also when one is
// cut between two calls, and the text still reads the same.
func TestLiveReplyStreamsNoMention(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	run := b.run()
	written := []string{"Ping <", "!channel> and <@U0BOSS1> in <#C0GENERAL|general>, <!subteam^S0123ABC>; a < b.", " cc <!here>"}

	l := b.show(r, run, written[0])
	l.Delta(written[1])
	b.tick(l)
	l.Delta(written[2]) // sent as the stream ends
	l.Close(core.ProgressPaused)

	calls := b.fake.Calls("chat.startStream", "chat.appendStream", "chat.stopStream")
	if len(calls) != 3 {
		t.Fatalf("streaming calls = %+v, want start, append and stop", calls)
	}
	for _, c := range calls {
		if md := c.Args["markdown_text"]; strings.Contains(md, "<!") || strings.Contains(md, "<@") || strings.Contains(md, "<#") {
			t.Errorf("%s markdown_text = %q, holds a mention", c.Method, md)
		}
	}
	msgs := b.thread()
	if len(msgs) != 1 {
		t.Fatalf("thread = %+v, want the streamed message", msgs)
	}
	text := msgs[0].Text
	for _, mention := range []string{"<!", "<@", "<#"} {
		if strings.Contains(text, mention) {
			t.Errorf("streamed message %q holds %s", text, mention)
		}
	}
	if want := strings.Join(written, "") + "\n\n" + chat.NotePaused; strings.ReplaceAll(text, zeroWidthSpace, "") != want {
		t.Errorf("streamed message reads %q, want %q", strings.ReplaceAll(text, zeroWidthSpace, ""), want)
	}
}

// A stream of mentions is sent in calls within Slack's limit once they are
// made inert, and none of the text is lost.
func TestStreamPieceFitsOneCall(t *testing.T) {
	t.Parallel()
	for _, md := range []string{strings.Repeat("<!", maxStreamText), strings.Repeat("é<@U1>", maxStreamText/3), strings.Repeat("<", maxStreamText+1), "a <"} {
		var got strings.Builder
		for rest := md; rest != ""; {
			piece, markdown := streamPiece(rest)
			if n := textLen(markdown); n > maxStreamText || piece == "" {
				t.Fatalf("piece of %d bytes sends %d characters, want 1 to %d", len(piece), n, maxStreamText)
			}
			if strings.Contains(markdown, "<!") || strings.Contains(markdown, "<@") || strings.HasSuffix(markdown, "<") {
				t.Fatalf("piece %.40q… is not inert", markdown)
			}
			got.WriteString(markdown)
			rest = rest[len(piece):]
		}
		if strings.ReplaceAll(got.String(), zeroWidthSpace, "") != md {
			t.Errorf("pieces of %.20q… do not add up to it", md)
		}
	}
}

// TestLiveReplyCancelled: a run cancelled while it shows ends with a note.
func TestLiveReplyCancelled(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	run := b.run()
	l := b.show(r, run, "Let me")
	if _, err := b.store.CancelRun(t.Context(), run.ID, core.Cancel{By: "U0ASKER", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close(core.ProgressStopped)
	if msgs := b.thread(); len(msgs) != 1 || msgs[0].Text != "Let me\n\n"+chat.NoteCancelled || msgs[0].Streaming {
		t.Errorf("thread = %+v, want the stream ended with the cancel note", msgs)
	}
}

// gatedModel streams "Hello, ", waits for release, then streams the rest of
// its answer.
type gatedModel struct {
	wrote, release chan struct{}
}

func (m gatedModel) Generate(ctx context.Context, _ core.ModelRequest, onDelta func(string)) (core.ModelResponse, error) {
	onDelta("Hello, ")
	m.wrote <- struct{}{}
	select {
	case <-m.release:
	case <-ctx.Done():
		return core.ModelResponse{}, ctx.Err()
	}
	onDelta("**world**.")
	return core.ModelResponse{Text: "Hello, **world**."}, nil
}

// TestLiveReplyThroughTheEngine: the engine streams the model's deltas to
// Slack and closes the live reply before finishing the run, so the reply
// job finds the stream and makes it the answer.
func TestLiveReplyThroughTheEngine(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	m := gatedModel{wrote: make(chan struct{}), release: make(chan struct{})}
	replied := make(chan error, 1)
	reply := func(ctx context.Context, job core.Job) error {
		err := r.Handle(ctx, job)
		replied <- err
		return err
	}
	eng, err := core.NewEngine(core.EngineConfig{Store: b.store, Queue: b.store, Logger: slog.New(slog.DiscardHandler),
		Agents:   map[string]*core.Agent{"helper": {ID: "helper", Model: m}},
		OnFinish: r.OnFinish, Handlers: map[string]func(context.Context, core.Job) error{chat.JobReply: reply}, Progress: r.Progress})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = eng.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })

	_, err = eng.Submit(t.Context(), core.SubmitRequest{AgentID: "helper", Input: "hi", UserID: "U0ASKER", Type: core.RunTypeChat,
		Binding: core.Binding{Platform: chat.PlatformSlack, Workspace: "T0TEAM", Channel: liveChannel, Thread: liveThread}})
	if err != nil {
		t.Fatal(err)
	}
	<-m.wrote
	b.tick(nil)
	if msgs := b.thread(); len(msgs) != 1 || msgs[0].Text != "Hello, " || !msgs[0].Streaming {
		t.Fatalf("thread = %+v, want the stream of the text so far", msgs)
	}
	close(m.release)
	select {
	case err := <-replied:
		if err != nil {
			t.Fatalf("reply job: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply job ran")
	}
	b.wantAnswer("Hello, **world**.")
	b.wantCalls(0, "chat.postMessage")
}

// TestLiveReplyGoneIsPostedAnew: the live message can no longer be edited
// (someone deleted it): the answer is posted anew, once, not lost.
func TestLiveReplyGoneIsPostedAnew(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	b.fake.Error("chat.startStream", "not_allowed_token_type", 1)
	run := b.run()
	l := b.show(r, run, "")
	ts := b.thread()[0].TS
	l.Close(core.ProgressFinished)
	b.fake.Error("chat.update", "message_not_found", 1) // as if deleted (the fake keeps it: it shows below)
	b.finish(r, run, "All **done**.")
	b.finishAgain(r, run) // a retried job posts nothing again
	msgs := b.thread()
	if len(msgs) != 2 || msgs[0].TS != ts || msgs[1].Text != mrkdwnOf("All **done**.") {
		t.Fatalf("thread = %+v, want the answer posted once after the message that could not be edited", msgs)
	}
}

// TestLiveReplyGoneRepostedAtMostOnce: when the answer posted in place of a
// deleted live message has an unknown outcome (Slack answered 500), a
// retried job does not post it again: it may be in the thread already.
func TestLiveReplyGoneRepostedAtMostOnce(t *testing.T) {
	t.Parallel()
	b := newLiveBench(t)
	r := b.replier()
	b.fake.Error("chat.startStream", "not_allowed_token_type", 1)
	run := b.run()
	l := b.show(r, run, "")
	l.Close(core.ProgressFinished)
	b.fake.Error("chat.update", "message_not_found", 3) // deleted, for every attempt
	b.fake.ServerError("chat.postMessage", 500, 1)
	posts := b.calls("chat.postMessage")
	done, err := b.store.FinishRun(t.Context(), run.ID, "", core.Finish{Status: core.RunCompleted, Output: "All **done**.", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the job, and its retry should it fail
		_ = r.Handle(t.Context(), r.OnFinish(done, done.Status)[0])
	}
	if n := b.calls("chat.postMessage") - posts; n != 1 {
		t.Fatalf("the answer was posted %d times after the live message was gone, want once", n)
	}
}
