package chat_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/store/sqlite"
)

// fakePlatform records what the pipeline asks of a platform: a list of
// calls, "start <text>", "show <text>", "end <text>|<note>", "resume <ref>",
// "reply <text> live=<ref>".
type fakePlatform struct {
	name string
	mu   sync.Mutex
	log  []string
	fail error // StartLive's error, when set
}

func (f *fakePlatform) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *fakePlatform) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func (f *fakePlatform) Reply(_ context.Context, a chat.Answer) error {
	f.add("reply " + a.Text + " live=" + a.Live)
	return nil
}

func (f *fakePlatform) LiveKey(runID string, seg int) string {
	return fmt.Sprintf("%s:live:%s:%d", f.name, runID, seg)
}

func (f *fakePlatform) StartLive(_ context.Context, _ core.Run, _ core.Binding, text string) (chat.LiveMessage, string, error) {
	if f.fail != nil {
		return nil, "", f.fail
	}
	f.add("start " + text)
	return fakeMessage{f}, "msg1", nil
}

func (f *fakePlatform) ResumeLive(_ context.Context, _ core.Binding, ref string) chat.LiveMessage {
	f.add("resume " + ref)
	return fakeMessage{f}
}

var errMaybe = errors.New("maybe posted")

func (f *fakePlatform) MaybePosted(err error) bool { return errors.Is(err, errMaybe) }

// typingPlatform is a fakePlatform with a typing indicator that lasts
// again (the pipeline's ticks are 1s).
type typingPlatform struct {
	*fakePlatform
	again time.Duration
}

func (f typingPlatform) Typing(context.Context, core.Run, core.Binding) (time.Duration, error) {
	f.add("typing")
	return f.again, nil
}

type fakeMessage struct{ f *fakePlatform }

func (m fakeMessage) Show(_ context.Context, text string) error {
	m.f.add("show " + text)
	return nil
}

func (m fakeMessage) End(_ context.Context, text, note string) error {
	m.f.add("end " + text + "|" + note)
	return nil
}

// countingDB counts the sessions read.
type countingDB struct {
	*sqlite.DB
	sessions atomic.Int64
}

func (c *countingDB) GetSession(ctx context.Context, id string) (core.Session, error) {
	c.sessions.Add(1)
	return c.DB.GetSession(ctx, id)
}

// pipe is the reply pipeline over SQLite with a Slack-like and a
// Telegram-like fake platform; live messages tick by hand.
type pipe struct {
	t     *testing.T
	db    *countingDB
	p     *chat.Replies
	slack *fakePlatform
	tg    *fakePlatform
	ticks chan time.Time
}

func newPipe(t *testing.T) *pipe {
	t.Helper()
	db := openDB(t)
	x := &pipe{t: t, db: &countingDB{DB: db}, slack: &fakePlatform{name: "slack"}, tg: &fakePlatform{name: "telegram"}, ticks: make(chan time.Time)}
	var err error
	x.p, err = chat.NewReplies(chat.RepliesConfig{Store: x.db,
		Platforms: map[string]chat.Platform{chat.PlatformSlack: x.slack, chat.PlatformTelegram: x.tg},
		Ticker:    func(time.Duration) (<-chan time.Time, func()) { return x.ticks, func() {} }})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// run creates a chat run in a conversation of platform.
func (x *pipe) run(platform string) core.Run {
	x.t.Helper()
	sid := core.NewID("ses")
	run, err := x.db.CreateRun(x.t.Context(), core.NewRun{
		Session: core.Session{ID: sid, AgentID: "helper", Binding: core.Binding{Platform: platform, Channel: "C1", Thread: "1.1"}},
		Run:     core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "helper", Type: core.RunTypeChat, Input: "hi", CreatedAt: time.Now()},
	})
	if err != nil {
		x.t.Fatal(err)
	}
	return run
}

// tick lets the live message l act on one tick, and returns once it waits
// for the next (or is done).
func (x *pipe) tick(l core.ProgressSink) {
	x.t.Helper()
	for range 2 {
		select {
		case x.ticks <- time.Time{}:
		case <-l.(*chat.Live).Done():
			return
		case <-time.After(10 * time.Second):
			x.t.Fatal("the live message did not take the tick")
		}
	}
}

// finish completes run with answer and runs the reply jobs it gets.
func (x *pipe) finish(run core.Run, answer string) []core.Job {
	x.t.Helper()
	done, err := x.db.FinishRun(x.t.Context(), run.ID, "", core.Finish{Status: core.RunCompleted, Output: answer, At: time.Now()})
	if err != nil {
		x.t.Fatal(err)
	}
	jobs := x.p.OnFinish(done, done.Status)
	for _, j := range jobs {
		if err := x.p.Handlers()[j.Kind](x.t.Context(), j); err != nil {
			x.t.Fatal(err)
		}
	}
	return jobs
}

func want(t *testing.T, f *fakePlatform, calls ...string) {
	t.Helper()
	if got := f.calls(); !slices.Equal(got, calls) {
		t.Errorf("%s calls = %q, want %q", f.name, got, calls)
	}
}

// TestOneReplyJobRoutedByPlatform: a finished chat run gets one reply job,
// whichever platforms are configured, and only its own platform answers.
func TestOneReplyJobRoutedByPlatform(t *testing.T) {
	t.Parallel()
	x := newPipe(t)
	jobs := x.finish(x.run(chat.PlatformTelegram), "Hi there.")
	if len(jobs) != 1 || jobs[0].Kind != chat.JobReply {
		t.Fatalf("jobs = %+v, want one %s job", jobs, chat.JobReply)
	}
	want(t, x.tg, "reply Hi there. live=")
	want(t, x.slack)
	if x.p.OnFinish(core.Run{ID: "run_api", Type: core.RunTypeAPI, Status: core.RunCompleted}, core.RunCompleted) != nil {
		t.Error("an API run got a reply job")
	}
	// A run of a platform that is not configured (here: Discord) gets no
	// job and shows nowhere.
	discord := x.run(chat.PlatformDiscord)
	if jobs := x.finish(discord, "Nobody sees this."); len(jobs) != 0 {
		t.Errorf("a Discord run got %d reply jobs on a gateway without Discord", len(jobs))
	}
	if x.p.Progress(discord) != nil {
		t.Error("a Discord run shows live on a gateway without Discord")
	}
	want(t, x.slack)
	// The run carries its conversation: routing it read no session.
	if n := x.db.sessions.Load(); n != 0 {
		t.Errorf("the pipeline read %d sessions, want none", n)
	}
}

// TestLegacyReplyJobsAreHandled: reply jobs of an earlier release, one per
// platform, are answered by the run's own platform.
func TestLegacyReplyJobsAreHandled(t *testing.T) {
	t.Parallel()
	x := newPipe(t)
	run := x.run(chat.PlatformSlack)
	if _, err := x.db.FinishRun(t.Context(), run.ID, "", core.Finish{Status: core.RunCompleted, Output: "Old.", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"slack.reply", "telegram.reply", "discord.reply"} {
		job := core.Job{Kind: kind, Payload: []byte(`{"run_id":"` + run.ID + `"}`)}
		h := x.p.Handlers()[kind]
		if h == nil {
			t.Fatalf("no handler for %s", kind)
		}
		if err := h(t.Context(), job); err != nil {
			t.Fatal(err)
		}
	}
	want(t, x.slack, "reply Old. live=", "reply Old. live=", "reply Old. live=") // the platform's outbox posts once
	want(t, x.tg)
}

// TestLiveMessagePacing: nothing shows before the first tick; then the
// message opens with the text so far and takes one call per tick that has
// something new, however many deltas came; the answer replaces it.
func TestLiveMessagePacing(t *testing.T) {
	t.Parallel()
	x := newPipe(t)
	run := x.run(chat.PlatformSlack)
	l := x.p.Progress(run)
	l.Delta("Hel")
	want(t, x.slack)
	x.tick(l)
	want(t, x.slack, "start Hel")
	l.Delta("lo")
	l.Delta(", ")
	l.Delta("world")
	x.tick(l)
	x.tick(l) // nothing new: no call
	want(t, x.slack, "start Hel", "show Hello, world")
	l.Close(core.ProgressFinished)
	x.finish(run, "Hello, world.")
	want(t, x.slack, "start Hel", "show Hello, world", "reply Hello, world. live=msg1")
	want(t, x.tg)
}

// TestLiveQuickAnswerIsNotShown: a run done before the first tick shows
// nothing live; its answer is posted.
func TestLiveQuickAnswerIsNotShown(t *testing.T) {
	t.Parallel()
	x := newPipe(t)
	run := x.run(chat.PlatformTelegram)
	l := x.p.Progress(run)
	l.Delta("Quick.")
	l.Close(core.ProgressFinished)
	x.finish(run, "Quick.")
	want(t, x.tg, "reply Quick. live=")
	if x.p.Progress(core.Run{ID: "run_api", Type: core.RunTypeAPI}) != nil {
		t.Error("an API run shows live")
	}
}

// TestLivePauseAndCancelNotes: a pause ends the message with the waiting
// note; a cancellation with the cancelled note; a run that stopped
// otherwise (a node going away) leaves it as it is.
func TestLivePauseAndCancelNotes(t *testing.T) {
	t.Parallel()
	x := newPipe(t)
	paused := x.run(chat.PlatformSlack)
	l := x.p.Progress(paused)
	l.Delta("Deploying.")
	x.tick(l)
	l.Close(core.ProgressPaused)
	want(t, x.slack, "start Deploying.", "end Deploying.|"+chat.NotePaused)

	cancelled := x.run(chat.PlatformTelegram)
	l = x.p.Progress(cancelled)
	l.Delta("Let me")
	x.tick(l)
	if _, err := x.db.CancelRun(t.Context(), cancelled.ID, core.Cancel{By: "U1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close(core.ProgressStopped)
	want(t, x.tg, "start Let me", "end Let me|"+chat.NoteCancelled)

	gone := x.run(chat.PlatformTelegram)
	l = x.p.Progress(gone)
	x.tick(l)
	l.Close(core.ProgressStopped)
	want(t, x.tg, "start Let me", "end Let me|"+chat.NoteCancelled, "start ")
}

// TestLiveAfterACrash: the next attempt at a segment resumes the message an
// earlier one posted; one whose outcome is unknown is never shown again, and
// the answer is then posted new.
func TestLiveAfterACrash(t *testing.T) {
	t.Parallel()
	x := newPipe(t)
	run := x.run(chat.PlatformSlack)
	l := x.p.Progress(run)
	x.tick(l)
	l.Close(core.ProgressStopped)
	l = x.p.Progress(run) // another node takes the run over
	x.tick(l)
	l.Delta("Again.")
	x.tick(l)
	l.Close(core.ProgressFinished)
	want(t, x.slack, "start ", "resume msg1", "show Again.")

	x.tg.fail = fmt.Errorf("telegram: %w", errMaybe)
	run = x.run(chat.PlatformTelegram)
	l = x.p.Progress(run)
	l.Delta("Lost?")
	x.tick(l)
	l.Close(core.ProgressStopped)
	x.tg.fail = nil
	l = x.p.Progress(run)
	x.tick(l)
	l.Close(core.ProgressFinished)
	x.finish(run, "The answer.")
	want(t, x.tg, "reply The answer. live=")
	if state, _, _ := x.db.SendRef(t.Context(), x.tg.LiveKey(run.ID, 0)); state != core.SendUncertain {
		t.Errorf("live message state = %q, want %q", state, core.SendUncertain)
	}
	if strings.Contains(strings.Join(x.tg.calls(), ","), "resume") {
		t.Error("a message whose outcome is unknown was resumed")
	}
}

// TestLiveTypingIndicator: a platform with a typing indicator shows it once
// the run shows live, then again each time it runs out, until the run
// ends; one that lasts (again 0) is shown once.
func TestLiveTypingIndicator(t *testing.T) {
	t.Parallel()
	x := newPipe(t)
	typer := typingPlatform{fakePlatform: &fakePlatform{name: "discord"}, again: 3 * time.Second}
	once := typingPlatform{fakePlatform: &fakePlatform{name: "slack"}}
	var err error
	x.p, err = chat.NewReplies(chat.RepliesConfig{Store: x.db,
		Platforms: map[string]chat.Platform{chat.PlatformDiscord: typer, chat.PlatformSlack: once},
		Ticker:    func(time.Duration) (<-chan time.Time, func()) { return x.ticks, func() {} }})
	if err != nil {
		t.Fatal(err)
	}
	l := x.p.Progress(x.run(chat.PlatformDiscord))
	for range 4 { // 8 ticks (x.tick passes two): typing at ticks 1, 4 and 7
		x.tick(l)
	}
	l.Close(core.ProgressFinished)
	want(t, typer.fakePlatform, "start ", "typing", "typing", "typing")

	l = x.p.Progress(x.run(chat.PlatformSlack))
	for range 4 {
		x.tick(l)
	}
	l.Close(core.ProgressFinished)
	want(t, once.fakePlatform, "start ", "typing")
}
