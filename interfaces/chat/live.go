package chat

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Notes that end a live message when the run stops without its answer
// there (Markdown).
const (
	NotePaused    = "_Waiting for approval._"
	NoteCancelled = "_Cancelled._"
)

// Progress is the engine's progress hook (core.EngineConfig.Progress): a
// chat run of a configured platform shows live once it has run for one
// LiveInterval, in a message its platform posts and then brings up to date
// at most once per LiveInterval. A pause for an approval ends the message
// with a note; the next segment of the run gets a message of its own. The
// message goes through the outbox like any other (intent first, then its
// ref), and the reply job turns it into the answer. It is best effort: the
// reply job delivers the answer whatever happens here.
func (p *Replies) Progress(run core.Run) core.ProgressSink {
	if run.Type != core.RunTypeChat || len(p.cfg.Platforms) == 0 {
		return nil
	}
	if c := run.Conversation; c.Platform != "" && (p.cfg.Platforms[c.Platform] == nil || c.Channel == "") {
		return nil // nothing shows it here
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Live{p: p, run: run, ctx: ctx, cancel: cancel, ended: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// Live is the live message of one run while this node advances it.
type Live struct {
	p      *Replies
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

// live is the message a Live shows in.
type live struct {
	b      core.Binding
	msg    LiveMessage
	shown  string // what the last call showed ("" for a message resumed)
	typer  Typer  // nil: no (more) typing indicator
	typeIn int    // ticks until the typing indicator is shown again
}

// Delta implements core.ProgressSink.
func (l *Live) Delta(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.off {
		l.text.WriteString(text)
	}
}

// Close implements core.ProgressSink: it waits for the call in flight, at
// most LiveCloseTimeout, then abandons it.
func (l *Live) Close(reason core.ProgressEnd) {
	l.once.Do(func() {
		l.mu.Lock()
		l.reason = reason
		l.mu.Unlock()
		close(l.ended)
	})
	t := time.NewTimer(l.p.cfg.LiveCloseTimeout)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		l.p.cfg.Logger.Warn("live message: a platform call is taking long; abandoning it", "run", l.run.ID)
		l.cancel()
		<-l.done
	}
}

// Done is closed when the live message has nothing more to do.
func (l *Live) Done() <-chan struct{} { return l.done }

func (l *Live) snapshot() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

func (l *Live) isEnded() bool {
	select {
	case <-l.ended:
		return true
	default:
		return false
	}
}

// loop opens the message at the first tick, then shows what is new at each
// tick, until Close.
func (l *Live) loop() {
	defer close(l.done)
	defer l.cancel()
	defer func() {
		l.mu.Lock()
		l.off = true
		l.text.Reset()
		l.mu.Unlock()
	}()
	tick, stop := l.p.cfg.Ticker(l.p.cfg.LiveInterval)
	defer stop()
	var m *live
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
		} else if text := l.snapshot(); text != m.shown {
			if err = m.msg.Show(l.ctx, text); err == nil {
				m.shown = text
			}
		}
		if err == nil {
			l.typing(m)
		}
		if err != nil {
			if l.ctx.Err() == nil {
				l.p.cfg.Logger.Warn("live message stopped; the answer still comes when the run ends", "run", l.run.ID, "err", err)
			}
			return
		}
	}
}

// open claims the live message of the run's current segment and starts it;
// nil when nothing shows.
func (l *Live) open() (*live, error) {
	ctx, st := l.ctx, l.p.cfg.Store
	b, err := Conversation(ctx, st, l.run)
	if err != nil {
		return nil, err
	}
	plat := l.p.cfg.Platforms[b.Platform]
	if plat == nil || b.Channel == "" {
		return nil, nil
	}
	evs, err := st.Events(ctx, l.run.ID, 0, 0)
	if err != nil {
		return nil, err
	}
	seg := segment(evs)
	key := plat.LiveKey(l.run.ID, seg)
	if l.isEnded() {
		return nil, nil
	}
	at := l.now()
	claimed, state, err := st.ClaimSend(ctx, key, at)
	if err != nil {
		// Recorded, its answer lost? Nothing was posted: give it back.
		_ = Record(ctx, func(ctx context.Context) error { return st.ReleaseSend(ctx, key, at) })
		return nil, err
	}
	if !claimed { // an earlier attempt's message, when its ref is known
		if state != core.SendSent {
			return nil, nil
		}
		_, ref, err := st.SendRef(ctx, key)
		if err != nil {
			return nil, err
		}
		if msg := plat.ResumeLive(ctx, b, ref); msg != nil {
			return l.opened(plat, b, msg, ""), nil
		}
		return nil, nil
	}
	if l.isEnded() { // the run is done meanwhile: its answer is posted whole
		return nil, l.record(key, core.SendFailed, "")
	}
	text := l.snapshot()
	msg, ref, err := plat.StartLive(ctx, l.run, b, text)
	switch {
	case err != nil && plat.MaybePosted(err):
		return nil, errors.Join(err, l.record(key, core.SendUncertain, ""))
	case err != nil:
		return nil, errors.Join(err, l.record(key, core.SendFailed, ""))
	}
	if err := l.record(key, core.SendSent, ref); err != nil {
		return nil, err // not recorded: the message gets nothing more
	}
	return l.opened(plat, b, msg, text), nil
}

// opened is the live message msg of plat, showing text.
func (l *Live) opened(plat Platform, b core.Binding, msg LiveMessage, text string) *live {
	m := &live{b: b, msg: msg, shown: text}
	m.typer, _ = plat.(Typer)
	return m
}

// typing shows the platform's typing indicator when it is due.
func (l *Live) typing(m *live) {
	if m.typer == nil {
		return
	}
	if m.typeIn--; m.typeIn > 0 {
		return
	}
	again, err := m.typer.Typing(l.ctx, l.run, m.b)
	switch {
	case err != nil:
		l.p.cfg.Logger.Debug("typing indicator stopped", "run", l.run.ID, "err", err)
		m.typer = nil
	case again <= 0:
		m.typer = nil
	default:
		m.typeIn = int((again + l.p.cfg.LiveInterval - 1) / l.p.cfg.LiveInterval)
	}
}

// record sets the outbox state of the live message, even after Close
// abandoned the call (recordState: its ref is what a resumed run edits).
func (l *Live) record(key, state, ref string) error {
	return recordState(l.ctx, l.p.cfg.Store, key, state, ref, l.now())
}

func (l *Live) now() time.Time { return l.p.cfg.Clock.Now().UTC() }

// end closes m for the reason Close gave. A finished run's answer replaces
// it (the reply job); a pause or a cancellation ends it with a note; a run
// that stopped otherwise leaves it to the next attempt.
func (l *Live) end(m *live) {
	l.mu.Lock()
	reason := l.reason
	l.mu.Unlock()
	note := ""
	switch reason {
	case core.ProgressPaused:
		note = NotePaused
	case core.ProgressStopped:
		if run, err := l.p.cfg.Store.GetRun(l.ctx, l.run.ID); err == nil && run.Status == core.RunCancelled {
			note = NoteCancelled
		}
	}
	if note == "" {
		return
	}
	if err := m.msg.End(l.ctx, l.snapshot(), note); err != nil && l.ctx.Err() == nil {
		l.p.cfg.Logger.Warn("live message not ended", "run", l.run.ID, "err", err)
	}
}

// JoinNote adds note after text, in a paragraph of its own.
func JoinNote(text, note string) string {
	if note == "" {
		return text
	}
	if strings.TrimSpace(text) == "" {
		return text + note
	}
	return text + "\n\n" + note
}
