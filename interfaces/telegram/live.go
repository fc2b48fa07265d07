package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Live replies: while this node runs a chat run's model, the answer shows in
// the chat as it is written, in one message edited at most once per
// LiveInterval. It is best effort; the JobReply job still delivers the
// answer, editing the live message into its first part.

// Notes shown in a live message.
const (
	pausedNote   = "Waiting for approval."
	thinkingNote = "…"
)

// liveKey names the outbox entry of a run's live message. Segment n is the
// run after its n-th pause for an approval, shown in a message of its own
// (below the card).
func liveKey(runID string, segment int) string {
	return "telegram:live:" + runID + ":" + strconv.Itoa(segment)
}

// segment returns how many times run id paused for an approval.
func (n *Notifier) segment(ctx context.Context, runID string) (int, error) {
	evs, err := n.cfg.Store.Events(ctx, runID, 0, 0)
	if err != nil {
		return 0, err
	}
	seg := 0
	for _, ev := range evs {
		if ev.Type == core.EventApprovalRequested {
			seg++
		}
	}
	return seg, nil
}

// liveMessage returns the id of the live message of the run's last segment,
// 0 when there is none (or its outcome is unknown: the answer is then
// posted anew).
func (n *Notifier) liveMessage(ctx context.Context, runID string) (int, error) {
	seg, err := n.segment(ctx, runID)
	if err != nil {
		return 0, err
	}
	state, ref, err := n.cfg.Store.SendRef(ctx, liveKey(runID, seg))
	if errors.Is(err, core.ErrNotFound) || err == nil && state != core.SendSent {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	id, _ := strconv.Atoi(ref)
	return id, nil
}

// Progress is the engine's progress hook (core.EngineConfig.Progress): a
// chat run of a Telegram conversation shows live once it has taken
// LiveInterval.
func (n *Notifier) Progress(run core.Run) core.ProgressSink {
	if run.Type != core.RunTypeChat {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &live{n: n, run: run, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), ended: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// live is the live reply of one run while this node advances it.
type live struct {
	n      *Notifier
	run    core.Run
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	ended  chan struct{} // closed by Close
	done   chan struct{} // closed when loop returns
	once   sync.Once

	mu     sync.Mutex
	text   strings.Builder
	off    bool
	reason core.ProgressEnd
}

// Delta implements core.ProgressSink.
func (l *live) Delta(text string) {
	l.mu.Lock()
	if !l.off {
		l.text.WriteString(text)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close implements core.ProgressSink: it waits for a call in flight (at
// most LiveCloseTimeout) and, for a pause, notes it in the message.
func (l *live) Close(reason core.ProgressEnd) {
	l.once.Do(func() {
		l.mu.Lock()
		l.reason = reason
		l.mu.Unlock()
		close(l.ended)
		t := time.NewTimer(l.n.cfg.LiveCloseTimeout)
		defer t.Stop()
		select {
		case <-l.done:
		case <-t.C:
			l.cancel()
			<-l.done
		}
		l.cancel()
	})
}

func (l *live) snapshot() (string, core.ProgressEnd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String(), l.reason
}

func (l *live) stop() {
	l.mu.Lock()
	l.off = true
	l.mu.Unlock()
}

// loop shows the text: nothing before the first LiveInterval, then one
// message, edited at most once per LiveInterval.
func (l *live) loop() {
	defer close(l.done)
	n := l.n
	sess, err := n.cfg.Store.GetSession(l.ctx, l.run.SessionID)
	if err != nil || sess.Binding.Platform != chat.PlatformTelegram || sess.Binding.Channel == "" {
		l.stop()
		return
	}
	chatID, err := ChatID(sess.Binding.Channel)
	if err != nil {
		l.stop()
		return
	}
	seg, err := n.segment(l.ctx, l.run.ID)
	if err != nil {
		l.stop()
		return
	}
	tick := time.NewTicker(n.cfg.LiveInterval)
	defer tick.Stop()
	select { // a quick answer is simply posted
	case <-l.ended:
		return
	case <-tick.C:
	}
	msgID, shown := 0, ""
	for {
		text, reason := l.snapshot()
		view := liveView(text, reason)
		switch {
		case msgID == 0 && (reason == "" || reason == core.ProgressPaused && text != ""):
			res, err := n.postOnce(l.ctx, liveKey(l.run.ID, seg), chatID, threadID(sess.Binding.Thread), view, nil)
			if err != nil || !res.Posted {
				l.stop() // the answer will come as a new message
				return
			}
			msgID, _ = strconv.Atoi(res.Ref)
			shown = view
		case msgID != 0 && view != shown && (reason == "" || reason == core.ProgressPaused):
			if err := n.cfg.Client.Edit(l.ctx, chatID, msgID, view, nil); err != nil {
				n.log.Debug("telegram live edit", "run", l.run.ID, "err", err)
			}
			shown = view
		}
		if reason != "" {
			return
		}
		select {
		case <-l.ended:
		case <-l.ctx.Done():
			return
		case <-l.wake:
			select { // at most one edit per interval
			case <-tick.C:
			case <-l.ended:
			}
		}
	}
}

// liveView is what a live message shows of text: the start of it within
// Telegram's limit, with a note when the run paused.
func liveView(text string, reason core.ProgressEnd) string {
	if strings.TrimSpace(text) == "" {
		text = thinkingNote
	}
	if parts := Split(text, MaxMessageLen-len(pausedNote)-4); len(parts) > 1 {
		text = parts[0] + " …"
	}
	text = Markdown(text)
	if reason == core.ProgressPaused {
		text += "\n\n_" + Escape(pausedNote) + "_"
	}
	return text
}
