package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// streamModel streams the text of each answer of Model in two deltas.
type streamModel struct{ core.Model }

func (m streamModel) Generate(ctx context.Context, req core.ModelRequest, onDelta func(string)) (core.ModelResponse, error) {
	resp, err := m.Model.Generate(ctx, req, nil)
	if err == nil && resp.Text != "" {
		half := len(resp.Text) / 2
		onDelta(resp.Text[:half])
		onDelta(resp.Text[half:])
	}
	return resp, err
}

// progressLog records what the engine shows live, one sink per advance.
type progressLog struct {
	db func() *sqlite.DB

	mu    sync.Mutex
	sinks []*recSink
}

type recSink struct {
	log    *progressLog
	run    string
	text   strings.Builder
	reason core.ProgressEnd
	// statusAtClose is the run's stored status when Close was called.
	statusAtClose core.RunStatus
	closes        int
}

func (p *progressLog) hook(run core.Run) core.ProgressSink {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &recSink{log: p, run: run.ID}
	p.sinks = append(p.sinks, s)
	return s
}

func (s *recSink) Delta(text string) {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	s.text.WriteString(text)
}

func (s *recSink) Close(reason core.ProgressEnd) {
	run, err := s.log.db().GetRun(context.Background(), s.run)
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	s.reason, s.closes = reason, s.closes+1
	if err == nil {
		s.statusAtClose = run.Status
	}
}

// seen returns, per sink, the text it got, why it was closed and the run's
// status then.
func (p *progressLog) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range p.sinks {
		out = append(out, strings.Join([]string{s.text.String(), string(s.reason), string(s.statusAtClose), strings.Repeat("!", s.closes-1)}, "|"))
	}
	return out
}

func progressHarness(t *testing.T, agents map[string]*core.Agent, opts sqlite.Options) (*harness, *progressLog) {
	t.Helper()
	p := &progressLog{}
	h := newHarness(t, agents, opts, func(h *harness) { h.progress = p.hook })
	p.db = func() *sqlite.DB { return h.db }
	return h, p
}

func wantSeen(t *testing.T, p *progressLog, want ...string) {
	t.Helper()
	if got := p.seen(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress sinks (text|close reason|run status at close) =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProgressSeesDeltasAndClosesBeforeTheChange: the live display gets the
// model's deltas and is closed before the run finishes or pauses, so what it
// sends cannot land after the answer's delivery began. Each advance gets its
// own sink.
func TestProgressSeesDeltasAndClosesBeforeTheChange(t *testing.T) {
	t.Parallel()
	t.Run("finished", func(t *testing.T) {
		t.Parallel()
		m := streamModel{&scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) {
			return core.ModelResponse{Text: "hello there"}, nil
		}}}
		h, p := progressHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{})
		h.waitStatus(h.submit("a", "", "hi").ID, core.RunCompleted)
		wantSeen(t, p, "hello there|finished|running|")
	})
	t.Run("paused then finished", func(t *testing.T) {
		t.Parallel()
		tool := &recTool{}
		agent, m := deployAgent(`{"service":"web","env":"staging"}`, tool, core.ApprovalRule{Required: true})
		agent.Model = streamModel{m}
		script := m.Func
		m.Func = func(n int, req core.ModelRequest) (core.ModelResponse, error) {
			resp, err := script(n, req)
			if n == 1 {
				resp.Text = "Deploying web." // said before the tool call
			}
			return resp, err
		}
		h, p := progressHarness(t, map[string]*core.Agent{"ops": agent}, sqlite.Options{})
		run := h.submit("ops", "", "deploy web")
		h.waitStatus(run.ID, core.RunPaused)
		wantSeen(t, p, "Deploying web.|paused|running|")
		if _, err := h.aps.Decide(t.Context(), h.pending(run.ID)[0].ID, approval.Request{Approve: true, Principal: keyP("bob")}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(run.ID, core.RunCompleted)
		wantSeen(t, p, "Deploying web.|paused|running|", `tool said: {"ok":true}|finished|running|`)
	})
	t.Run("stopped by a failed step, then finished", func(t *testing.T) {
		t.Parallel()
		m := streamModel{&scriptModel{Func: func(n int, _ core.ModelRequest) (core.ModelResponse, error) {
			if n == 1 {
				return core.ModelResponse{}, errors.New("connection reset")
			}
			return core.ModelResponse{Text: "fine"}, nil
		}}}
		h, p := progressHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{Backoff: func(int) time.Duration { return 0 }})
		h.waitStatus(h.submit("a", "", "hi").ID, core.RunCompleted)
		wantSeen(t, p, "|stopped|running|", "fine|finished|running|")
	})
}

// TestNilProgressSinkShowsNothing: a hook may decline a run.
func TestNilProgressSinkShowsNothing(t *testing.T) {
	t.Parallel()
	var called sync.WaitGroup
	called.Add(1)
	m := streamModel{&scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: "ok"}, nil
	}}}
	h := newHarness(t, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{}, func(h *harness) {
		h.progress = func(core.Run) core.ProgressSink { called.Done(); return nil }
	})
	done := h.waitStatus(h.submit("a", "", "hi").ID, core.RunCompleted)
	called.Wait()
	if done.Output != "ok" {
		t.Fatalf("output = %q", done.Output)
	}
}
