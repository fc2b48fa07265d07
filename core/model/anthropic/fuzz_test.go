package anthropic

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzGenerateStream feeds arbitrary bytes to Generate as the event stream of
// a 200 response: real event sequences, cut, reordered or garbled. Generate
// returns an error that names the model, or a response whose text is what
// onDelta was given and whose tool calls all have JSON arguments; it never
// panics.
func FuzzGenerateStream(f *testing.F) {
	start := ev("message_start", `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}}`)
	ping := ev("ping", `{"type": "ping"}`)
	text := func(i int, pieces ...string) string {
		s := ev("content_block_start", `{"type":"content_block_start","index":`+strconv.Itoa(i)+`,"content_block":{"type":"text","text":""}}`)
		for _, p := range pieces {
			s += ev("content_block_delta", `{"type":"content_block_delta","index":`+strconv.Itoa(i)+`,"delta":{"type":"text_delta","text":`+jsonString(p)+`}}`)
		}
		return s + ev("content_block_stop", `{"type":"content_block_stop","index":`+strconv.Itoa(i)+`}`)
	}
	tool := func(i int, id, name string, pieces ...string) string {
		s := ev("content_block_start", `{"type":"content_block_start","index":`+strconv.Itoa(i)+`,"content_block":{"type":"tool_use","id":`+jsonString(id)+`,"name":`+jsonString(name)+`,"input":{}}}`)
		for _, p := range pieces {
			s += ev("content_block_delta", `{"type":"content_block_delta","index":`+strconv.Itoa(i)+`,"delta":{"type":"input_json_delta","partial_json":`+jsonString(p)+`}}`)
		}
		return s + ev("content_block_stop", `{"type":"content_block_stop","index":`+strconv.Itoa(i)+`}`)
	}
	end := func(reason string) string {
		return ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+reason+`","stop_sequence":null},"usage":{"output_tokens":89}}`) +
			ev("message_stop", `{"type":"message_stop"}`)
	}
	for _, body := range []string{
		textStream,
		start + text(0, "Hello", "! How can I", " help?") + ping + end("end_turn"),
		// Tool use, as the API streams it: text, then two calls whose input
		// arrives in pieces, the first of them empty.
		start + text(0, "Okay, let me check", " the weather.") + ping +
			tool(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", "", `{"location":`, ` "San Fra`, `ncisco, CA"`, `, "unit": "fah`, `renheit"}`) +
			tool(2, "toolu_02", "get_time", "") + end("tool_use"),
		// Thinking before the answer.
		start + ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me solve this."}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`) + text(1, "27 * 453 = 12,231") + end("end_turn"),
		// Cut off: in a tool's input, at max_tokens, before message_stop.
		start + tool(0, "toolu_c", "write", `{"text": "Once up`) + end("max_tokens"),
		start + text(0, "Half a sen"),
		// An error event mid-stream.
		start + text(0, "Hel") + ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		ev("error", `{"type":"error","error":"not an object"}`),
		// Indexes out of order, unknown events, data-only events, CRLF.
		start + tool(1, "toolu_x", "f", "{}") + end("tool_use"),
		start + ev("content_block_delta", `{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}`) + end("end_turn"),
		start + ev("vendor_event", `{"type":"vendor_event","x":1}`) + "data: {\"type\":\"message_stop\"}\n\n" + end("end_turn"),
		strings.ReplaceAll(textStream, "\n", "\r\n"),
		"", "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "event: ping\n\n",
	} {
		f.Add([]byte(body))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := New(Config{Model: "fuzz-model", BaseURL: "http://model.invalid", MaxRetries: -1, HTTPClient: eventStream(string(body))})
		if err != nil {
			t.Fatal(err)
		}
		var deltas []string
		resp, err := m.Generate(t.Context(), userSays("deploy api to staging"), collect(&deltas))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "anthropic fuzz-model: ") {
				t.Fatalf("error %q does not name the model", err)
			}
			return
		}
		if got := strings.Join(deltas, ""); got != resp.Text {
			t.Fatalf("onDelta got %q, Text is %q", got, resp.Text)
		}
		for i, tc := range resp.ToolCalls {
			if !json.Valid(tc.Arguments) {
				t.Fatalf("tool call %d arguments %q are not JSON", i, tc.Arguments)
			}
		}
	})
}
