package slack

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Live replies: while this node runs a chat run's model, the answer shows in
// the thread as it is written. It is best effort; the JobReply job still
// delivers the answer, turning the live message into its first message.

// LiveConfig configures live replies (Replier.Progress). The zero value of
// each field is its default.
type LiveConfig struct {
	// Interval is the pace of a live reply: it shows after one Interval (a
	// quicker answer is simply posted), and then takes at most one edit per
	// Interval. Default 1s, Slack's pace for messages in one channel.
	Interval time.Duration
	// CloseTimeout is how long the end of a live reply waits for a Slack
	// call in flight before abandoning it. The run's change (finish, pause)
	// waits that long at most. Default 5s.
	CloseTimeout time.Duration
}

// maxStreamText is the most Markdown chat.startStream, chat.appendStream and
// chat.stopStream take in one call.
const maxStreamText = 12_000

// Notes that end a live reply when the run stops without an answer here.
const (
	pausedNote    = "_Waiting for approval._"
	cancelledNote = "_Cancelled._"
	thinkingNote  = "_Thinking…_"
)

// thinkingBlocks is the placeholder posted while nothing is written yet, when
// Slack refuses to stream.
func thinkingBlocks() []slackapi.Block {
	return []slackapi.Block{slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType, thinkingNote, false, false))}
}

// streamKey names the outbox entry of a run's live message. Segment n is the
// run after its n-th pause for an approval: each segment shows in a message
// of its own, so the answer that follows an approval comes after its card.
func streamKey(runID string, segment int) string {
	key := "slack:reply:" + runID + ":stream"
	if segment > 0 {
		key += ":" + strconv.Itoa(segment)
	}
	return key
}

// liveRef is the outbox ref of a live message: its ts and whether it was
// started with chat.startStream ("stream:<ts>") or posted ("post:<ts>").
type liveRef struct {
	ts     string
	stream bool
}

func (l liveRef) String() string {
	if l.stream {
		return "stream:" + l.ts
	}
	return "post:" + l.ts
}

func parseLiveRef(s string) (liveRef, bool) {
	kind, ts, ok := strings.Cut(s, ":")
	if !ok || ts == "" || (kind != "stream" && kind != "post") {
		return liveRef{}, false
	}
	return liveRef{ts: ts, stream: kind == "stream"}, true
}

// segment returns how many times run id paused for an approval.
func (r *Replier) segment(ctx context.Context, runID string) (int, error) {
	return chat.Segment(ctx, r.cfg.Store, runID)
}

// liveMessage returns the live message of the run's last segment, nil when
// there is none or its ts is unknown. Answer text only ever goes to a live
// message whose ts is recorded, so one whose start has an unknown outcome
// shows at most the thinking placeholder: the answer is then posted anew.
func (r *Replier) liveMessage(ctx context.Context, runID string) (*liveRef, error) {
	seg, err := r.segment(ctx, runID)
	if err != nil {
		return nil, err
	}
	state, ref, err := r.cfg.Store.SendRef(ctx, streamKey(runID, seg))
	switch {
	case errors.Is(err, core.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case state != core.SendSent:
		if state != core.SendFailed {
			r.log.Warn("slack live reply outcome unknown; posting the answer as a new message", "run", runID, "state", state)
		}
		return nil, nil
	}
	lr, ok := parseLiveRef(ref)
	if !ok {
		return nil, nil
	}
	return &lr, nil
}

// finalize makes the live message m the first message of the answer. Unlike
// a post, an edit is made again when an earlier attempt's outcome is
// unknown: it cannot double anything.
func (r *Replier) finalize(ctx context.Context, key string, b core.Binding, m liveRef, text string, blocks []slackapi.Block) error {
	claimed, state, err := r.cfg.Store.ClaimSend(ctx, key, r.now())
	if err != nil {
		return err
	}
	if !claimed && state == core.SendSent {
		return nil
	}
	if m.stream {
		// Slack refuses to stop a stream that ended already (an earlier
		// attempt, a pause, its own timeout): nothing to do then.
		if err := r.cfg.Client.StopStream(ctx, b.Channel, m.ts, "", nil); err != nil && ctx.Err() != nil {
			return err
		}
	}
	err = r.cfg.Client.Update(ctx, b.Channel, m.ts, text, blocks)
	if refusedWith(err, "message_not_found", "cant_update_message") {
		r.log.Warn("slack live reply cannot be edited; posting the answer anew", "run_key", key, "err", err)
		if err := r.cfg.Store.SetSendState(ctx, key, core.SendFailed, "", r.now()); err != nil {
			return err
		}
		_, err = r.postOnce(ctx, key, b.Channel, b.Thread, text, blocks)
		return err
	}
	if err != nil { // the edit can be made again: leave the key claimable
		return errors.Join(err, r.cfg.Store.SetSendState(ctx, key, core.SendFailed, "", r.now()))
	}
	return r.cfg.Store.SetSendState(ctx, key, core.SendSent, m.ts, r.now())
}

// refusedWith reports whether err is a refusal from Slack with one of codes.
func refusedWith(err error, codes ...string) bool {
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	for _, c := range codes {
		if apiErr.Code == c {
			return true
		}
	}
	return false
}

// Progress is the engine's progress hook (core.EngineConfig.Progress). A
// chat run in a Slack thread shows live once it has run for one
// LiveConfig.Interval: a message streamed with chat.startStream and
// chat.appendStream, or, where Slack refuses to stream, a "Thinking…"
// message edited with chat.update as the answer grows — at most one call per
// Interval either way, through the client's channel limiter. A pause for an
// approval ends the message with a note; the next segment of the run gets a
// message of its own. The message goes through the outbox like any other:
// intent first, then its ts, and the reply job turns it into the answer.
func (r *Replier) Progress(run core.Run) core.ProgressSink {
	if run.Type != core.RunTypeChat {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &live{r: r, run: run, ctx: ctx, cancel: cancel, ended: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// live is the live reply of one run while this node advances it.
type live struct {
	r      *Replier
	run    core.Run
	ctx    context.Context // ended by Close after the close timeout
	cancel context.CancelFunc
	ended  chan struct{} // closed by Close
	done   chan struct{} // closed when loop returns
	once   sync.Once

	mu     sync.Mutex
	text   strings.Builder // what the model wrote
	off    bool            // nothing shows: stop keeping text
	reason core.ProgressEnd
}

// liveMsg is the message a live reply shows in.
type liveMsg struct {
	b     core.Binding
	ref   liveRef
	edit  bool   // replace the text with chat.update (a posted message, or a stream taken over)
	sent  int    // bytes of the text streamed so far
	shown string // the text shown by the last edit
}

// Delta implements core.ProgressSink.
func (l *live) Delta(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.off {
		l.text.WriteString(text)
	}
}

// Close implements core.ProgressSink: it waits for the call in flight, at
// most CloseTimeout, then abandons it.
func (l *live) Close(reason core.ProgressEnd) {
	l.once.Do(func() {
		l.mu.Lock()
		l.reason = reason
		l.mu.Unlock()
		close(l.ended)
	})
	t := time.NewTimer(l.r.cfg.Live.CloseTimeout)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		l.r.log.Warn("slack live reply: a call is taking long; abandoning it", "run", l.run.ID)
		l.cancel()
		<-l.done
	}
}

func (l *live) snapshot() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

func (l *live) isEnded() bool {
	select {
	case <-l.ended:
		return true
	default:
		return false
	}
}

// loop opens the message at the first tick, then shows what is new at each
// tick, until Close.
func (l *live) loop() {
	defer close(l.done)
	defer l.cancel()
	defer func() {
		l.mu.Lock()
		l.off = true
		l.text.Reset()
		l.mu.Unlock()
	}()
	tick, stop := l.r.ticker(l.r.cfg.Live.Interval)
	defer stop()
	var m *liveMsg
	for {
		select {
		case <-l.ended:
			if m != nil {
				l.end(m)
			}
			return
		case <-tick:
		}
		var err error
		if m == nil {
			m, err = l.open()
			if m == nil && err == nil {
				return // nothing to show here
			}
		} else {
			err = l.show(m)
		}
		if err != nil {
			if l.ctx.Err() == nil {
				l.r.log.Warn("slack live reply stopped; the answer still comes when the run ends", "run", l.run.ID, "err", err)
			}
			return
		}
	}
}

// open claims the live message of the run's current segment and starts it;
// nil when nothing shows.
func (l *live) open() (*liveMsg, error) {
	ctx, st := l.ctx, l.r.cfg.Store
	sess, err := st.GetSession(ctx, l.run.SessionID)
	if err != nil {
		return nil, err
	}
	b := sess.Binding
	if b.Platform != chat.PlatformSlack || b.Channel == "" {
		return nil, nil
	}
	seg, err := l.r.segment(ctx, l.run.ID)
	if err != nil {
		return nil, err
	}
	key := streamKey(l.run.ID, seg)
	if l.isEnded() {
		return nil, nil
	}
	claimed, state, err := st.ClaimSend(ctx, key, l.r.now())
	if err != nil {
		return nil, err
	}
	if !claimed {
		return l.takeOver(key, state, b)
	}
	if l.isEnded() { // the run is done meanwhile: its answer is posted whole
		return nil, l.record(key, core.SendFailed, "")
	}
	return l.start(key, b)
}

// takeOver goes on with the live message an earlier attempt at this segment
// left (a step retried, a node gone), when its ts is known. Its text is
// unknown, so from now on it is replaced, not appended to.
func (l *live) takeOver(key, state string, b core.Binding) (*liveMsg, error) {
	if state != core.SendSent {
		return nil, nil
	}
	_, ref, err := l.r.cfg.Store.SendRef(l.ctx, key)
	if err != nil {
		return nil, err
	}
	lr, ok := parseLiveRef(ref)
	if !ok {
		return nil, nil
	}
	if lr.stream {
		_ = l.r.cfg.Client.StopStream(l.ctx, b.Channel, lr.ts, "", nil) // refused when it ended already
	}
	return &liveMsg{b: b, ref: lr, edit: true}, nil
}

// start shows the text so far in a new message: a stream in the thread, or a
// posted message when Slack refuses to stream there. It records the outcome
// of the intent; only a message whose ts is recorded ever gets answer text.
func (l *live) start(key string, b core.Binding) (*liveMsg, error) {
	text := l.snapshot()
	m, err := l.startStream(b, text)
	if m == nil && err == nil {
		m = &liveMsg{b: b, edit: true, shown: text}
		body, blocks := thinkingNote, thinkingBlocks()
		if text != "" {
			body, blocks = firstMessage(text)
		}
		m.ref.ts, err = l.r.cfg.Client.Post(l.ctx, b.Channel, b.Thread, body, blocks)
	}
	switch {
	case errors.Is(err, ErrMaybePosted):
		return nil, errors.Join(err, l.record(key, core.SendUncertain, ""))
	case err != nil:
		return nil, errors.Join(err, l.record(key, core.SendFailed, ""))
	}
	if err := l.record(key, core.SendSent, m.ref.String()); err != nil {
		return nil, err // not recorded: the message gets nothing more
	}
	return m, nil
}

// startStream opens a stream in the thread with the text so far; nil, nil
// when Slack refuses to stream there (the app is not an AI app, the method
// is unknown, the conversation does not allow it). A refusal is remembered
// for the channel until the process restarts.
func (l *live) startStream(b core.Binding, text string) (*liveMsg, error) {
	if b.Thread == "" || l.r.noStream(b.Channel) {
		return nil, nil
	}
	first := text[:prefixWithin(text, maxStreamText)]
	ts, err := l.r.cfg.Client.StartStream(l.ctx, StreamTarget{
		Channel: b.Channel, ThreadTS: b.Thread, RecipientUserID: l.run.UserID, RecipientTeamID: b.Workspace,
	}, first)
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		l.r.log.Info("slack refused to stream; posting and editing instead", "channel", b.Channel, "err", err)
		l.r.streamRefused.Store(b.Channel, true)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &liveMsg{b: b, ref: liveRef{ts: ts, stream: true}, sent: len(first)}, nil
}

// record sets the outbox state of the live message, even after Close
// abandoned the call.
func (l *live) record(key, state, ref string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), 5*time.Second)
	defer cancel()
	return l.r.cfg.Store.SetSendState(ctx, key, state, ref, l.r.now())
}

// show brings m up to date with one call, when there is something new.
func (l *live) show(m *liveMsg) error {
	text := l.snapshot()
	if m.edit {
		if text == m.shown {
			return nil
		}
		body, blocks := firstMessage(text)
		if err := l.r.cfg.Client.Update(l.ctx, m.b.Channel, m.ref.ts, body, blocks); err != nil {
			return err
		}
		m.shown = text
		return nil
	}
	rest := text[m.sent:]
	if rest == "" {
		return nil
	}
	piece := rest[:prefixWithin(rest, maxStreamText)]
	if err := l.r.cfg.Client.AppendStream(l.ctx, m.b.Channel, m.ref.ts, piece); err != nil {
		return err
	}
	m.sent += len(piece)
	return nil
}

// end closes m for the reason Close gave. A finished run's answer replaces
// it (the reply job); a pause or a cancellation ends it with a note; a run
// that stopped otherwise leaves it to the next attempt.
func (l *live) end(m *liveMsg) {
	l.mu.Lock()
	reason := l.reason
	l.mu.Unlock()
	note := ""
	switch reason {
	case core.ProgressPaused:
		note = pausedNote
	case core.ProgressStopped:
		if run, err := l.r.cfg.Store.GetRun(l.ctx, l.run.ID); err == nil && run.Status == core.RunCancelled {
			note = cancelledNote
		}
	}
	if note == "" {
		return
	}
	if err := l.conclude(m, note); err != nil && l.ctx.Err() == nil {
		l.r.log.Warn("slack live reply not ended", "run", l.run.ID, "err", err)
	}
}

// conclude shows everything written, then note, and ends the stream.
func (l *live) conclude(m *liveMsg, note string) error {
	full := joinNote(l.snapshot(), note)
	if m.edit {
		body, blocks := firstMessage(full)
		return l.r.cfg.Client.Update(l.ctx, m.b.Channel, m.ref.ts, body, blocks)
	}
	rest := full[m.sent:]
	for textLen(rest) > maxStreamText {
		piece := rest[:prefixWithin(rest, maxStreamText)]
		if err := l.r.cfg.Client.AppendStream(l.ctx, m.b.Channel, m.ref.ts, piece); err != nil {
			return err
		}
		rest = rest[len(piece):]
	}
	return l.r.cfg.Client.StopStream(l.ctx, m.b.Channel, m.ref.ts, rest, nil)
}

// joinNote adds note after text, in a paragraph of its own.
func joinNote(text, note string) string {
	if strings.TrimSpace(text) == "" {
		return text + note
	}
	return text + "\n\n" + note
}

// firstMessage renders Markdown as the first Slack message of an answer:
// its mrkdwn text and section blocks.
func firstMessage(md string) (string, []slackapi.Block) {
	msgs := Messages(Mrkdwn(md))
	if len(msgs) == 0 {
		return "", nil
	}
	return strings.Join(msgs[0], "\n\n"), sectionBlocks(msgs[0])
}

// noStream reports whether Slack refused to stream in channel before.
func (r *Replier) noStream(channel string) bool {
	_, ok := r.streamRefused.Load(channel)
	return ok
}

// ticker returns ticks every d and a function that stops them.
type tickerFunc func(d time.Duration) (<-chan time.Time, func())

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
