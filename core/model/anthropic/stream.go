package anthropic

import (
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentgate/agentgate/core"
)

// turn accumulates the events of one streamed message: its text and
// tool_use blocks, usage and stop reason. Blocks of other types (thinking,
// server tools) are skipped.
type turn struct {
	onDelta func(text string)
	blocks  []block // by index
	stopped bool    // message_stop arrived
	reason  string

	// Token counts, each the last the stream reported.
	input, cacheWrite, cacheRead, output int64
}

// block is one content block of the message.
type block struct {
	kind     string // the content block's type
	text     []byte
	id, name string
	input    []byte // a tool_use's partial_json pieces
}

// add adds one event to the turn.
func (t *turn) add(ev anthropic.MessageStreamEventUnion) error {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		t.input, t.cacheWrite, t.cacheRead, t.output = u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens
	case "content_block_start":
		// Blocks start in index order, without gaps.
		if ev.Index != int64(len(t.blocks)) {
			return fmt.Errorf("stream: content block %d started, want %d", ev.Index, len(t.blocks))
		}
		cb := ev.ContentBlock
		t.blocks = append(t.blocks, block{kind: cb.Type, id: cb.ID, name: cb.Name})
		if cb.Type == "text" {
			t.text(&t.blocks[len(t.blocks)-1], cb.Text)
		}
	case "content_block_delta":
		if ev.Index < 0 || ev.Index >= int64(len(t.blocks)) {
			return fmt.Errorf("stream: delta for content block %d, which has not started", ev.Index)
		}
		b := &t.blocks[ev.Index]
		switch {
		case ev.Delta.Type == "text_delta" && b.kind == "text":
			t.text(b, ev.Delta.Text)
		case ev.Delta.Type == "input_json_delta" && b.kind == "tool_use":
			b.input = append(b.input, ev.Delta.PartialJSON...)
		}
	case "message_delta":
		t.reason = string(ev.Delta.StopReason)
		// Each count is the message's total so far; the ones it leaves out
		// keep message_start's.
		u := ev.Usage
		t.output = u.OutputTokens
		if u.JSON.InputTokens.Valid() {
			t.input = u.InputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			t.cacheWrite = u.CacheCreationInputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			t.cacheRead = u.CacheReadInputTokens
		}
	case "message_stop":
		t.stopped = true
	}
	return nil
}

// text adds s to text block b and passes it on.
func (t *turn) text(b *block, s string) {
	if s == "" {
		return
	}
	b.text = append(b.text, s...)
	if t.onDelta != nil {
		t.onDelta(s)
	}
}

// response is the turn as Generate returns it. Its input tokens include
// those read from and written to the prompt cache, which the API counts
// apart: OpenAI's prompt tokens include cached ones too.
func (t *turn) response() core.ModelResponse {
	resp := core.ModelResponse{
		Usage:      core.Usage{InputTokens: t.input + t.cacheWrite + t.cacheRead, OutputTokens: t.output},
		StopReason: t.reason,
	}
	var text strings.Builder
	for _, b := range t.blocks {
		switch b.kind {
		case "text":
			text.Write(b.text)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, core.ToolCall{ID: b.id, Name: b.name, Arguments: arguments(string(b.input))})
		}
	}
	resp.Text = text.String()
	return resp
}
