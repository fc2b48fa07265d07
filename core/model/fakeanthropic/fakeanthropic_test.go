package fakeanthropic_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/core/model/fakeanthropic"
)

// post sends body to url as the client does, with key as x-api-key.
func post(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

const hello = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply {
		return fakeanthropic.Reply{Text: "Let me search.", ToolCalls: []fakeanthropic.ToolCall{{Name: "search", Input: `{"q":"x"}`}},
			Usage: fakeanthropic.Usage{InputTokens: 5, OutputTokens: 2}}
	})
	base := srv.Start()
	t.Cleanup(srv.Close)

	res := post(t, base+"/v1/messages", "", hello)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	var got struct {
		ID, Type, Role, Model string
		Content               []struct {
			Type, Text, ID, Name string
			Input                json.RawMessage
		}
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
		Usage        struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "msg_") || got.Type != "message" || got.Role != "assistant" || got.Model != "m" ||
		got.StopReason != "tool_use" || got.StopSequence != nil || got.Usage.InputTokens != 5 || got.Usage.OutputTokens != 2 {
		t.Errorf("message = %+v", got)
	}
	if len(got.Content) != 2 || got.Content[0].Type != "text" || got.Content[0].Text != "Let me search." ||
		got.Content[1].Type != "tool_use" || !strings.HasPrefix(got.Content[1].ID, "toolu_") || got.Content[1].Name != "search" ||
		string(got.Content[1].Input) != `{"q":"x"}` {
		t.Errorf("content = %+v", got.Content)
	}
}

// event is one server-sent event, its data decoded.
type event struct {
	name string
	data struct {
		Type    string `json:"type"`
		Index   *int   `json:"index"`
		Message *struct {
			ID, Model string
			Content   []json.RawMessage
			Usage     struct {
				InputTokens int `json:"input_tokens"`
			}
		} `json:"message"`
		ContentBlock *struct {
			Type, Text, ID, Name string
			Input                json.RawMessage
		} `json:"content_block"`
		Delta *struct {
			Type         string  `json:"type"`
			Text         string  `json:"text"`
			PartialJSON  *string `json:"partial_json"`
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage *struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
		Error *fakeanthropic.Error `json:"error"`
	}
}

// readEvents reads an event stream, each event an event line and a data line.
func readEvents(t *testing.T, body io.Reader) []event {
	t.Helper()
	var events []event
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		name, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok || !sc.Scan() {
			t.Fatalf("line %q does not start an event", sc.Text())
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			t.Fatalf("event %s: line %q is not its data", name, sc.Text())
		}
		e := event{name: name}
		if err := json.Unmarshal([]byte(data), &e.data); err != nil {
			t.Fatalf("event %s: %v: %s", name, err, data)
		}
		if e.data.Type != name {
			t.Errorf("event %s has type %q", name, e.data.Type)
		}
		events = append(events, e)
	}
	return events
}

// TestStreaming checks the event sequence the API sends: message_start, each
// block's start, deltas and stop (a tool's input in several pieces, the
// first empty), pings, message_delta with the stop reason and the output
// tokens, and message_stop.
func TestStreaming(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply {
		return fakeanthropic.Reply{Text: "one two", ToolCalls: []fakeanthropic.ToolCall{
			{ID: "toolu_1", Name: "f", Input: `{"city":"Zürich"}`},
			{ID: "toolu_2", Name: "g"},
		}, Usage: fakeanthropic.Usage{InputTokens: 12, OutputTokens: 34}}
	})
	base := srv.Start()
	t.Cleanup(srv.Close)

	res := post(t, base+"/v1/messages", "",
		`{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := readEvents(t, res.Body)
	var names []string
	for _, e := range events {
		names = append(names, e.name)
	}
	wantNames := []string{
		"message_start",
		"content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop",
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("events:\n got %q\nwant %q", names, wantNames)
	}

	start := events[0].data.Message
	if start == nil || !strings.HasPrefix(start.ID, "msg_") || start.Model != "m" || start.Content == nil || len(start.Content) != 0 || start.Usage.InputTokens != 12 {
		t.Errorf("message_start = %+v", start)
	}
	var (
		text   string
		blocks []string
		inputs = map[int]string{}
		pieces = map[int]int{}
	)
	for _, e := range events {
		d := e.data
		switch e.name {
		case "content_block_start":
			if *d.Index != len(blocks) {
				t.Errorf("block %d started at index %d", len(blocks), *d.Index)
			}
			cb := d.ContentBlock
			blocks = append(blocks, cb.Type+" "+cb.ID+" "+cb.Name)
			if cb.Type == "tool_use" && string(cb.Input) != "{}" {
				t.Errorf("tool_use starts with input %s, want {}", cb.Input)
			}
		case "content_block_delta":
			switch d.Delta.Type {
			case "text_delta":
				text += d.Delta.Text
			case "input_json_delta":
				if pieces[*d.Index] == 0 && *d.Delta.PartialJSON != "" {
					t.Errorf("block %d: first input_json_delta is %q, want empty", *d.Index, *d.Delta.PartialJSON)
				}
				inputs[*d.Index] += *d.Delta.PartialJSON
				pieces[*d.Index]++
			}
		case "message_delta":
			if d.Delta.StopReason != "tool_use" || d.Delta.StopSequence != nil || d.Usage.OutputTokens != 34 {
				t.Errorf("message_delta = %+v %+v", d.Delta, d.Usage)
			}
		}
	}
	if text != "one two" || !reflect.DeepEqual(blocks, []string{"text  ", "tool_use toolu_1 f", "tool_use toolu_2 g"}) ||
		!reflect.DeepEqual(inputs, map[int]string{1: `{"city":"Zürich"}`, 2: "{}"}) {
		t.Errorf("text %q blocks %q inputs %v", text, blocks, inputs)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].LastUserText() != "hi" || !reqs[0].Stream || reqs[0].MaxTokens != 64 {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestStreamError(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.Script(func(fakeanthropic.Request) fakeanthropic.Reply {
		return fakeanthropic.Reply{Text: "Hel", StreamError: &fakeanthropic.Error{Type: "overloaded_error", Message: "Overloaded"}}
	})
	base := srv.Start()
	t.Cleanup(srv.Close)
	events := readEvents(t, post(t, base+"/v1/messages", "", `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`).Body)
	last := events[len(events)-1]
	if last.name != "error" || last.data.Error == nil || *last.data.Error != (fakeanthropic.Error{Type: "overloaded_error", Message: "Overloaded"}) {
		t.Errorf("last event = %s %+v, want the error", last.name, last.data.Error)
	}
}

func TestDefaultScript(t *testing.T) {
	t.Parallel()
	text := func(s string) fakeanthropic.Block { return fakeanthropic.Block{Type: "text", Text: s} }
	tests := []struct {
		req  fakeanthropic.Request
		want string
	}{
		{fakeanthropic.Request{Messages: []fakeanthropic.Message{{Role: "user", Content: []fakeanthropic.Block{text("hello")}}}}, "echo: hello"},
		{fakeanthropic.Request{Messages: []fakeanthropic.Message{
			{Role: "user", Content: []fakeanthropic.Block{text("hello")}},
			{Role: "assistant", Content: []fakeanthropic.Block{{Type: "tool_use", ID: "t1", Name: "a"}, {Type: "tool_use", ID: "t2", Name: "b"}}},
			{Role: "user", Content: []fakeanthropic.Block{{Type: "tool_result", ToolUseID: "t1", Text: "41"}, {Type: "tool_result", ToolUseID: "t2", Text: "42"}}},
		}}, "done: 42"},
	}
	for _, tt := range tests {
		if got := fakeanthropic.DefaultScript(tt.req); got.Text != tt.want {
			t.Errorf("DefaultScript = %q, want %q", got.Text, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	srv.APIKey = "sk-ant-1"
	base := srv.Start()
	t.Cleanup(srv.Close)

	toolUse := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"tool_use","id":"toolu_2","name":"f","input":{}}]}`
	result := func(id string) string {
		return `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"ok"}]}`
	}
	tests := []struct {
		name, path, key, body string
		status                int
		want                  fakeanthropic.Error
	}{
		{"unknown path", "/v1/complete", "sk-ant-1", hello, http.StatusNotFound, fakeanthropic.Error{Type: "not_found_error", Message: "Not Found"}},
		{"no key", "/v1/messages", "", hello, http.StatusUnauthorized, fakeanthropic.Error{Type: "authentication_error", Message: "x-api-key header is required"}},
		{"wrong key", "/v1/messages", "sk-ant-2", hello, http.StatusUnauthorized, fakeanthropic.Error{Type: "authentication_error", Message: "invalid x-api-key"}},
		{"no max_tokens", "/v1/messages", "sk-ant-1", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest,
			fakeanthropic.Error{Type: "invalid_request_error", Message: "max_tokens: Field required"}},
		{"empty text", "/v1/messages", "sk-ant-1", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, http.StatusBadRequest,
			fakeanthropic.Error{Type: "invalid_request_error", Message: "messages.0.content.0.text: text content blocks must be non-empty"}},
		{"image type", "/v1/messages", "sk-ant-1", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="}}]}]}`, http.StatusBadRequest,
			fakeanthropic.Error{Type: "invalid_request_error", Message: "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"}},
		{"tool results in two messages", "/v1/messages", "sk-ant-1", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},` + toolUse + `,` + result("toolu_1") + `,` + result("toolu_2") + `]}`, http.StatusBadRequest,
			fakeanthropic.Error{Type: "invalid_request_error", Message: "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_2. Each `tool_use` block must have a corresponding `tool_result` block in the next message."}},
		{"result without its call", "/v1/messages", "sk-ant-1", `{"model":"m","max_tokens":1,"messages":[` + result("toolu_9") + `]}`, http.StatusBadRequest,
			fakeanthropic.Error{Type: "invalid_request_error", Message: "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."}},
	}
	for _, tt := range tests {
		res := post(t, base+tt.path, tt.key, tt.body)
		var body struct {
			Type  string
			Error fakeanthropic.Error
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.StatusCode != tt.status || body.Type != "error" || body.Error != tt.want {
			t.Errorf("%s: status %d body %+v, want %d and %+v", tt.name, res.StatusCode, body, tt.status, tt.want)
		}
	}
}

func TestFailNext(t *testing.T) {
	t.Parallel()
	srv := fakeanthropic.New()
	base := srv.Start()
	t.Cleanup(srv.Close)
	srv.FailNext(2, 529)
	for i, want := range []int{529, 529, http.StatusOK} {
		res := post(t, base+"/v1/messages", "", hello)
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != want {
			t.Errorf("request %d: status %d, want %d", i, res.StatusCode, want)
		}
		if want == 529 && string(b) != `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` {
			t.Errorf("request %d: body %s", i, b)
		}
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("recorded %d requests, want 3", n)
	}
}
