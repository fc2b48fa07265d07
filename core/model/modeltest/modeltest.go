// Package modeltest is a suite every core.Model provider passes against its
// fake server: streamed text, tool calls and their results, images, usage
// and instructions, said in provider-neutral terms. A provider's test wires
// its fake into a Harness:
//
//	func TestSuite(t *testing.T) {
//		modeltest.Run(t, modeltest.Harness{New: func(t *testing.T, script func(modeltest.Turn) modeltest.Answer) core.Model {
//			srv := fake.New()
//			srv.Script(func(req fake.Request) fake.Reply { return reply(script(turn(req))) })
//			return newModel(t, srv.Start())
//		}})
//	}
package modeltest

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/core"
)

// Harness is a provider under test with its fake server.
type Harness struct {
	// New returns a model talking to a fresh fake, stopped when t ends,
	// whose replies follow script. The fake calls script once per request,
	// from its own goroutines.
	New func(t *testing.T, script func(Turn) Answer) core.Model
}

// Turn is what the fake received in one request, in provider-neutral terms.
type Turn struct {
	Instructions string
	Messages     []Message
	Tools        []string // names, in order
}

// Message is one message of a Turn. A provider that carries several tool
// results in one message (Anthropic's tool_result blocks) gives one Message
// per result, in order, before the rest of its message.
type Message struct {
	Role       core.Role
	Text       string          // the text parts joined; a tool result's content
	ToolCalls  []core.ToolCall // an assistant's, arguments as sent
	ToolCallID string          // a tool result's
	Images     int             // images in a user message
}

// Answer is what the fake replies with.
type Answer struct {
	Text      string          // streamed in several pieces
	ToolCalls []core.ToolCall // each with an ID
	Usage     core.Usage      // reported as is
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("StreamsText", func(t *testing.T) { t.Parallel(); streamsText(t, h) })
	t.Run("ToolCall", func(t *testing.T) { t.Parallel(); toolCall(t, h) })
	t.Run("TwoToolCalls", func(t *testing.T) { t.Parallel(); twoToolCalls(t, h) })
	t.Run("ToolResults", func(t *testing.T) { t.Parallel(); toolResults(t, h) })
	t.Run("Image", func(t *testing.T) { t.Parallel(); imageFile(t, h) })
	t.Run("Usage", func(t *testing.T) { t.Parallel(); usage(t, h) })
	t.Run("Instructions", func(t *testing.T) { t.Parallel(); instructions(t, h) })
}

// recorder is a script that answers with answer and keeps every Turn.
type recorder struct {
	answer Answer
	mu     sync.Mutex
	turns  []Turn
}

func (r *recorder) script(turn Turn) Answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns = append(r.turns, turn)
	return r.answer
}

// only returns the one turn the fake saw.
func (r *recorder) only(t *testing.T) Turn {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.turns) != 1 {
		t.Fatalf("the fake got %d requests, want 1", len(r.turns))
	}
	return r.turns[0]
}

// generate starts a model answering with answer and asks it req.
func generate(t *testing.T, h Harness, answer Answer, req core.ModelRequest) (core.ModelResponse, *recorder) {
	t.Helper()
	rec := &recorder{answer: answer}
	resp, err := h.New(t, rec.script).Generate(t.Context(), req, nil)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return resp, rec
}

func userSays(text string) core.ModelRequest {
	return core.ModelRequest{Messages: []core.Message{{Role: core.RoleUser, Content: text}}}
}

func streamsText(t *testing.T, h Harness) {
	const text = "Durable execution means a turn survives a crash."
	var deltas []string
	m := h.New(t, func(Turn) Answer { return Answer{Text: text} })
	resp, err := m.Generate(t.Context(), userSays("what is durable execution?"), func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Text != text || len(resp.ToolCalls) != 0 {
		t.Errorf("response = %+v, want text %q and no tool calls", resp, text)
	}
	if len(deltas) < 2 {
		t.Errorf("onDelta called %d times, want several: %q", len(deltas), deltas)
	}
	if got := strings.Join(deltas, ""); got != resp.Text {
		t.Errorf("deltas join to %q, Text is %q", got, resp.Text)
	}
	if resp.StopReason == "" {
		t.Error("StopReason is empty")
	}
}

func toolCall(t *testing.T, h Harness) {
	call := core.ToolCall{ID: "call_weather1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Zürich","units":"metric","days":3}`)}
	req := userSays("weather in Zürich?")
	req.Tools = []core.ToolSpec{weatherTool}
	resp, rec := generate(t, h, Answer{ToolCalls: []core.ToolCall{call}}, req)
	checkCalls(t, "response", resp.ToolCalls, []core.ToolCall{call})
	if resp.StopReason == "" {
		t.Error("StopReason is empty")
	}
	if got := rec.only(t).Tools; !reflect.DeepEqual(got, []string{"get_weather"}) {
		t.Errorf("the fake saw tools %q, want [get_weather]", got)
	}
}

func twoToolCalls(t *testing.T, h Harness) {
	calls := []core.ToolCall{
		{ID: "call_a", Name: "search", Arguments: json.RawMessage(`{"query":"durable execution engines"}`)},
		{ID: "call_b", Name: "fetch", Arguments: json.RawMessage(`{"url":"https://example.com/a?b=c&d=e"}`)},
	}
	resp, _ := generate(t, h, Answer{Text: "Looking both up.", ToolCalls: calls}, userSays("compare them"))
	if resp.Text != "Looking both up." {
		t.Errorf("Text = %q, want %q", resp.Text, "Looking both up.")
	}
	checkCalls(t, "response", resp.ToolCalls, calls)
}

// toolResults sends the conversation after two tool calls: the model sees
// the calls and both results.
func toolResults(t *testing.T, h Harness) {
	calls := []core.ToolCall{
		{ID: "call_w1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "call_w2", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)},
	}
	req := core.ModelRequest{
		Messages: []core.Message{
			{Role: core.RoleUser, Content: "Paris or Rome, which is warmer?"},
			{Role: core.RoleAssistant, Content: "Checking both.", ToolCalls: calls},
			{Role: core.RoleTool, ToolCallID: "call_w1", Name: "get_weather", Content: `{"temp_c":18}`},
			{Role: core.RoleTool, ToolCallID: "call_w2", Name: "get_weather", Content: `{"temp_c":24}`},
		},
		Tools: []core.ToolSpec{weatherTool},
	}
	resp, rec := generate(t, h, Answer{Text: "Rome is warmer."}, req)
	if resp.Text != "Rome is warmer." {
		t.Errorf("Text = %q, want %q", resp.Text, "Rome is warmer.")
	}
	msgs := rec.only(t).Messages
	if len(msgs) != 4 {
		t.Fatalf("the fake saw %d messages, want 4: %+v", len(msgs), msgs)
	}
	if m := msgs[1]; m.Role != core.RoleAssistant || m.Text != "Checking both." {
		t.Errorf("the fake saw %+v, want the assistant's turn", m)
	}
	checkCalls(t, "the assistant's turn", msgs[1].ToolCalls, calls)
	for i, want := range []Message{
		{Role: core.RoleTool, ToolCallID: "call_w1", Text: `{"temp_c":18}`},
		{Role: core.RoleTool, ToolCallID: "call_w2", Text: `{"temp_c":24}`},
	} {
		if got := msgs[2+i]; !reflect.DeepEqual(got, want) {
			t.Errorf("result %d: the fake saw %+v, want %+v", i, got, want)
		}
	}
}

func imageFile(t *testing.T, h Harness) {
	req := core.ModelRequest{Messages: []core.Message{{
		Role:    core.RoleUser,
		Content: "What is in this picture?",
		Files: []core.File{{
			Attachment: core.Attachment{ID: core.BlobID(pngHeader), Name: "cat.png", MIME: "image/png", Size: int64(len(pngHeader))},
			Data:       pngHeader,
		}},
	}}}
	_, rec := generate(t, h, Answer{Text: "A cat."}, req)
	want := []Message{{Role: core.RoleUser, Text: "What is in this picture?", Images: 1}}
	if got := rec.only(t).Messages; !reflect.DeepEqual(got, want) {
		t.Errorf("the fake saw %+v, want %+v", got, want)
	}
}

func usage(t *testing.T, h Harness) {
	want := core.Usage{InputTokens: 1234, OutputTokens: 56}
	resp, _ := generate(t, h, Answer{Text: "Counted.", Usage: want}, userSays("count"))
	if resp.Usage != want {
		t.Errorf("Usage = %+v, want %+v", resp.Usage, want)
	}
}

func instructions(t *testing.T, h Harness) {
	const text = "You are terse. Answer in one word."
	req := userSays("hello")
	req.Instructions = text
	_, rec := generate(t, h, Answer{Text: "Hi."}, req)
	turn := rec.only(t)
	if turn.Instructions != text {
		t.Errorf("the fake saw instructions %q, want %q", turn.Instructions, text)
	}
	if want := []Message{{Role: core.RoleUser, Text: "hello"}}; !reflect.DeepEqual(turn.Messages, want) {
		t.Errorf("the fake saw %+v, want %+v (instructions are not a message)", turn.Messages, want)
	}
}

var weatherTool = core.ToolSpec{
	Name:        "get_weather",
	Description: "Current weather for a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`),
}

// pngHeader stands in for an image: providers send any bytes of an image type.
var pngHeader = []byte("\x89PNG\r\n\x1a\n")

// checkCalls fails t unless got has want's ids and names and, as JSON,
// their arguments.
func checkCalls(t *testing.T, what string, got, want []core.ToolCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tool calls %+v, want %d", what, len(got), got, len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Name != want[i].Name || !jsonEqual(got[i].Arguments, want[i].Arguments) {
			t.Errorf("%s: tool call %d = %s %s(%s), want %s %s(%s)", what, i,
				got[i].ID, got[i].Name, got[i].Arguments, want[i].ID, want[i].Name, want[i].Arguments)
		}
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
