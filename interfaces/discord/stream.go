package discord

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
)

// Progress implements core.EngineConfig.Progress: a chat run of a Discord
// conversation shows its answer while the model writes it, in one message
// edited at most once per LiveInterval (default 1s), cut at 2,000
// characters; the reply job (Handle) edits it into the final answer. Runs
// of other platforms show nothing.
func (r *Replier) Progress(run core.Run) core.ProgressSink {
	if run.Type != core.RunTypeChat {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &live{r: r, run: run, ctx: ctx, cancel: cancel, ended: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// live is the live answer of one run while this node advances it.
type live struct {
	r      *Replier
	run    core.Run
	ctx    context.Context
	cancel context.CancelFunc
	ended  chan struct{} // closed by Close
	done   chan struct{} // closed when loop returns
	once   sync.Once

	mu     sync.Mutex
	text   strings.Builder
	off    bool // not a Discord run: keep nothing
	reason core.ProgressEnd
}

// pausedNote ends a live answer when the run pauses for an approval; what
// it says after the decision comes in a new message, below the card.
const pausedNote = "\n\n*Waiting for approval.*"

// Delta implements core.ProgressSink.
func (l *live) Delta(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.off {
		l.text.WriteString(text)
	}
}

// Close implements core.ProgressSink: it stops the edits and waits (5s at
// most) for one in flight.
func (l *live) Close(reason core.ProgressEnd) {
	l.once.Do(func() {
		l.mu.Lock()
		l.reason = reason
		l.mu.Unlock()
		close(l.ended)
	})
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
		l.cancel()
		<-l.done
	}
}

func (l *live) snapshot() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

func (l *live) loop() {
	defer close(l.done)
	defer l.cancel()
	sess, err := l.r.cfg.Store.GetSession(l.ctx, l.run.SessionID)
	if err != nil || sess.Binding.Platform != chat.PlatformDiscord || sess.Binding.Channel == "" {
		l.mu.Lock()
		l.off = true
		l.text.Reset()
		l.mu.Unlock()
		return
	}
	seg, err := chat.Segment(l.ctx, l.r.cfg.Store, l.run.ID)
	if err != nil {
		l.r.log.Warn("discord live answer not shown", "run", l.run.ID, "err", err)
		return
	}
	channel := sess.Binding.Channel
	t := time.NewTicker(l.r.cfg.LiveInterval)
	defer t.Stop()
	var id, shown string
	for {
		paused := false
		select {
		case <-l.ended:
			l.mu.Lock()
			paused = l.reason == core.ProgressPaused
			l.mu.Unlock()
			if !paused || id == "" {
				return
			}
		case <-t.C:
		}
		text := strings.TrimSpace(l.snapshot())
		if utf8.RuneCountInString(text) > MaxMessage-len(pausedNote) {
			text = string([]rune(text)[:MaxMessage-len(pausedNote)]) + " …"
		}
		if paused {
			text += pausedNote
		}
		if text == "" || text == shown {
			continue
		}
		if id == "" {
			res, err := l.r.postOnce(l.ctx, liveKey(l.run.ID, seg), channel, Message{Content: text})
			if err != nil || res.Ref == "" {
				l.r.log.Warn("discord live answer not shown", "run", l.run.ID, "err", err)
				return
			}
			id = res.Ref
			if res.Posted {
				shown = text
				continue
			}
		}
		err := l.r.cfg.Client.Edit(l.ctx, channel, id, Message{Content: text})
		if paused {
			return
		}
		if err != nil {
			l.r.log.Warn("discord live answer edit", "run", l.run.ID, "err", err)
			continue
		}
		shown = text
	}
}
