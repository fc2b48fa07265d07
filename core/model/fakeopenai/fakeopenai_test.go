package fakeopenai_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	srv.Script(func(fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "search", Arguments: `{"q":"x"}`}},
			Usage: fakeopenai.Usage{PromptTokens: 5, CompletionTokens: 2}}
	})
	base := srv.Start()
	t.Cleanup(srv.Close)

	// The path without /v1 is served too.
	res := post(t, strings.TrimSuffix(base, "/v1")+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	var got struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "chat.completion" || got.Model != "m" || len(got.Choices) != 1 {
		t.Fatalf("completion = %+v", got)
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Role != "assistant" || c.Message.Content != nil ||
		len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].ID == "" || c.Message.ToolCalls[0].Type != "function" ||
		c.Message.ToolCalls[0].Function.Name != "search" || c.Message.ToolCalls[0].Function.Arguments != `{"q":"x"}` {
		t.Errorf("choice = %+v", c)
	}
	if got.Usage.PromptTokens != 5 || got.Usage.CompletionTokens != 2 || got.Usage.TotalTokens != 7 {
		t.Errorf("usage = %+v", got.Usage)
	}
}

// TestStreaming checks the chunk sequence OpenAI sends: a role chunk, content
// fragments, a tool call's id and name and then its argument fragments, the
// finish reason, a usage chunk without choices, and [DONE].
func TestStreaming(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	srv.Script(func(fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Reply{Text: "one two", ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"city":"Zürich"}`}}}
	})
	base := srv.Start()
	t.Cleanup(srv.Close)

	res := post(t, base+"/chat/completions",
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		events = append(events, data)
	}
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events)
	}

	type chunk struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Delta struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	var (
		text, args, finish string
		names              []string
		argChunks          int
		usage              json.RawMessage
	)
	for i, e := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %d: %v: %s", i, err, e)
		}
		if c.ID == "" || c.Object != "chat.completion.chunk" {
			t.Errorf("chunk %d: id %q object %q", i, c.ID, c.Object)
		}
		if i == 0 && (len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant") {
			t.Errorf("first chunk has no assistant role: %s", e)
		}
		if string(c.Usage) != "null" && i < len(events)-2 {
			t.Errorf("chunk %d: usage %s before the last chunk", i, c.Usage)
		}
		usage = c.Usage
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					names = append(names, tc.ID+" "+tc.Function.Name)
				} else {
					argChunks++
				}
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text != "one two" || args != `{"city":"Zürich"}` || finish != "tool_calls" ||
		!reflect.DeepEqual(names, []string{"call_1 f"}) || argChunks < 2 {
		t.Errorf("text %q args %q finish %q calls %q argument chunks %d", text, args, finish, names, argChunks)
	}
	var u struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
	if err := json.Unmarshal(usage, &u); err != nil || u.PromptTokens == 0 || u.CompletionTokens == 0 {
		t.Errorf("last chunk usage = %s", usage)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].LastUserText() != "hi" || !reqs[0].Stream || !reqs[0].IncludeUsage {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestDefaultScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		req  fakeopenai.Request
		want string
	}{
		{fakeopenai.Request{Messages: []fakeopenai.Message{{Role: "user", Content: "hello"}}}, "echo: hello"},
		{fakeopenai.Request{Messages: []fakeopenai.Message{
			{Role: "user", Content: "hello"},
			{Role: "assistant", ToolCalls: []fakeopenai.ToolCall{{ID: "c", Name: "t", Arguments: "{}"}}},
			{Role: "tool", ToolCallID: "c", Content: "42"},
		}}, "done: 42"},
	}
	for _, tt := range tests {
		if got := fakeopenai.DefaultScript(tt.req); got.Text != tt.want {
			t.Errorf("DefaultScript = %q, want %q", got.Text, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	srv := fakeopenai.New()
	srv.APIKey = "sk-1"
	base := srv.Start()
	t.Cleanup(srv.Close)

	tests := []struct {
		name, path, body string
		status           int
	}{
		{"unknown path", "/embeddings", `{}`, http.StatusNotFound},
		{"no key", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		res := post(t, base+tt.path, tt.body)
		b, _ := io.ReadAll(res.Body)
		var e struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if res.StatusCode != tt.status || json.Unmarshal(b, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%s: status %d body %s, want %d and an OpenAI error body", tt.name, res.StatusCode, b, tt.status)
		}
	}
}
