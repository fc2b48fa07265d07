package anthropic

import (
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeanthropic"
	"github.com/agentgate/agentgate/core/model/modeltest"
)

func TestSuite(t *testing.T) {
	modeltest.Run(t, modeltest.Harness{New: func(t *testing.T, script func(modeltest.Turn) modeltest.Answer) core.Model {
		srv := fakeanthropic.New()
		srv.Script(func(req fakeanthropic.Request) fakeanthropic.Reply { return suiteReply(script(suiteTurn(req))) })
		return start(t, srv, Config{})
	}})
}

// suiteTurn is what fakeanthropic recorded, in the suite's terms: each
// tool_result block is a tool message of its own, before the rest of its
// user message.
func suiteTurn(req fakeanthropic.Request) modeltest.Turn {
	t := modeltest.Turn{Instructions: req.System}
	for _, m := range req.Messages {
		for _, r := range m.Blocks("tool_result") {
			t.Messages = append(t.Messages, modeltest.Message{Role: core.RoleTool, Text: r.Text, ToolCallID: r.ToolUseID})
		}
		msg := modeltest.Message{Role: core.Role(m.Role), Text: m.Text(), Images: len(m.Blocks("image"))}
		for _, u := range m.Blocks("tool_use") {
			msg.ToolCalls = append(msg.ToolCalls, core.ToolCall{ID: u.ID, Name: u.Name, Arguments: u.Input})
		}
		if msg.Text != "" || msg.Images > 0 || len(msg.ToolCalls) > 0 {
			t.Messages = append(t.Messages, msg)
		}
	}
	for _, tool := range req.Tools {
		t.Tools = append(t.Tools, tool.Name)
	}
	return t
}

// suiteReply is the suite's answer as fakeanthropic sends it.
func suiteReply(a modeltest.Answer) fakeanthropic.Reply {
	r := fakeanthropic.Reply{Text: a.Text, Usage: fakeanthropic.Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	for _, tc := range a.ToolCalls {
		r.ToolCalls = append(r.ToolCalls, fakeanthropic.ToolCall{ID: tc.ID, Name: tc.Name, Input: string(tc.Arguments)})
	}
	return r
}
