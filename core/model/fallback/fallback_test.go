package fallback_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fallback"
)

// stub answers with text (streamed in one delta when stream is set) or fails.
type stub struct {
	text   string
	stream bool
	err    error
	calls  int
}

func (s *stub) Generate(ctx context.Context, req core.ModelRequest, onDelta func(string)) (core.ModelResponse, error) {
	s.calls++
	if s.stream {
		onDelta(s.text)
	}
	if s.err != nil {
		return core.ModelResponse{}, s.err
	}
	return core.ModelResponse{Text: s.text}, nil
}

func chain(models ...*stub) *fallback.Model {
	m := &fallback.Model{Logger: slog.New(slog.DiscardHandler)}
	for i, s := range models {
		m.Models = append(m.Models, fallback.Named{Name: []string{"primary", "second", "third"}[i], Model: s})
	}
	return m
}

func TestTheNextModelAnswersWhenTheFirstIsDown(t *testing.T) {
	down := &stub{err: errors.New("503 overloaded")}
	second := &stub{text: "from the second"}
	third := &stub{text: "never asked"}
	resp, err := chain(down, second, third).Generate(t.Context(), core.ModelRequest{}, nil)
	if err != nil || resp.Text != "from the second" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	if down.calls != 1 || second.calls != 1 || third.calls != 0 {
		t.Fatalf("calls = %d, %d, %d", down.calls, second.calls, third.calls)
	}
}

func TestAllDownNamesEveryFailure(t *testing.T) {
	_, err := chain(&stub{err: errors.New("connection refused")}, &stub{err: errors.New("401 invalid key")}).
		Generate(t.Context(), core.ModelRequest{}, nil)
	if err == nil || !strings.Contains(err.Error(), "primary: connection refused") || !strings.Contains(err.Error(), "second: 401 invalid key") {
		t.Fatalf("err = %v", err)
	}
}

func TestNoFallbackAfterTextWasStreamed(t *testing.T) {
	cut := &stub{text: "half an answ", stream: true, err: errors.New("stream cut")}
	second := &stub{text: "whole answer"}
	var shown strings.Builder
	_, err := chain(cut, second).Generate(t.Context(), core.ModelRequest{}, func(s string) { shown.WriteString(s) })
	if err == nil || second.calls != 0 {
		t.Fatalf("err = %v, second asked %d times; want the failure and no second answer after text was shown", err, second.calls)
	}
	if shown.String() != "half an answ" {
		t.Fatalf("shown = %q", shown.String())
	}
}

func TestCancelledStopsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	second := &stub{text: "x"}
	if _, err := chain(&stub{err: context.Canceled}, second).Generate(ctx, core.ModelRequest{}, nil); err == nil || second.calls != 0 {
		t.Fatalf("err = %v, second asked %d times", err, second.calls)
	}
}
