package openai

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
	"github.com/agentgate/agentgate/core/model/modeltest"
)

func TestSuite(t *testing.T) {
	modeltest.Run(t, modeltest.Harness{New: func(t *testing.T, script func(modeltest.Turn) modeltest.Answer) core.Model {
		srv := fakeopenai.New()
		srv.Script(func(req fakeopenai.Request) fakeopenai.Reply { return suiteReply(script(suiteTurn(req))) })
		return start(t, srv, Config{})
	}})
}

// suiteTurn is what fakeopenai recorded, in the suite's terms.
func suiteTurn(req fakeopenai.Request) modeltest.Turn {
	var t modeltest.Turn
	for _, m := range req.Messages {
		if m.Role == "system" {
			t.Instructions += m.Content
			continue
		}
		msg := modeltest.Message{Role: core.Role(m.Role), Text: m.Content, ToolCallID: m.ToolCallID, Images: len(m.Images)}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, core.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: json.RawMessage(tc.Arguments)})
		}
		t.Messages = append(t.Messages, msg)
	}
	for _, tool := range req.Tools {
		t.Tools = append(t.Tools, tool.Name)
	}
	return t
}

// suiteReply is the suite's answer as fakeopenai sends it.
func suiteReply(a modeltest.Answer) fakeopenai.Reply {
	r := fakeopenai.Reply{Text: a.Text, Usage: fakeopenai.Usage{PromptTokens: a.Usage.InputTokens, CompletionTokens: a.Usage.OutputTokens}}
	for _, tc := range a.ToolCalls {
		r.ToolCalls = append(r.ToolCalls, fakeopenai.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)})
	}
	return r
}
