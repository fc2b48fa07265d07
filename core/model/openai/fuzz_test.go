package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fuzzStream is how the fuzz server answers one request.
type fuzzStream struct {
	status int
	ctype  string
	body   []byte
}

// FuzzGenerateStream drives Generate against a server on 127.0.0.1 that
// answers with a fuzzed status, Content-Type and body, streamed event by
// event as SSE: chunks, tool-call deltas, usage, error events, garbage.
// Generate returns an error or a response whose tool calls all have an id
// and JSON arguments; it never panics and never outlives its timeout.
func FuzzGenerateStream(f *testing.F) {
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	const done = "data: [DONE]\n\n"
	for _, body := range []string{
		// As OpenAI streams text, then usage on a last chunk without choices.
		chunk(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`) +
			chunk(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`) +
			chunk(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`) +
			chunk(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`) + done,
		// Tool calls: arguments over several chunks, two calls.
		chunk(`{"id":"c2","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"deploy","arguments":""}}]}}]}`) +
			chunk(`{"id":"c2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"service\":\"api\","}}]}}]}`) +
			chunk(`{"id":"c2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"env\":\"staging\"}"}},{"index":1,"id":"call_2","type":"function","function":{"name":"search","arguments":"{}"}}]}}]}`) +
			chunk(`{"id":"c2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`) + done,
		// Deviations of compatible servers (see TestGenerateWire).
		chunk(`{"id":"c3","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"search","arguments":"{\"q\": "}}]}}]}`) +
			chunk(`{"id":"c3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"oops"}}]}}]}`) +
			chunk(`{"id":"c3","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`) + done,
		chunk(`{"id":"a","choices":[{"index":0,"delta":{"content":"x"}}]}`) + chunk(`{"id":"b","choices":[{"index":0,"delta":{"content":"y"},"finish_reason":"stop"}]}`),
		chunk(`{"id":"c4","choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"function":{"name":"a"}},{"index":900,"function":{"name":"b"}}]}}]}`) +
			chunk(`{"id":"c4","choices":[{"index":3,"delta":{"refusal":"no"},"finish_reason":"stop"},{"index":0,"delta":{"refusal":"I can't"},"finish_reason":"stop"}]}`),
		chunk(`{"id":"c5","choices":[{"index":0,"delta":{"content":"Half a sen"}}]}`),
		chunk(`{"id":"c6","choices":[{"index":0,"delta":{"content":"x"}}]}`) + chunk(`{"error":{"message":"upstream overloaded","type":"server_error"}}`),
		"event: ping\ndata: \n\n: comment\n\ndata: {\"id\":\"c7\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n",
		"data: {\"id\":\n" + "data: \"c8\"}\n\n", "data: [DONE]\n\n", "data: null\n\n", "data: []\n\n", "",
	} {
		f.Add(200, "text/event-stream", []byte(body))
	}
	f.Add(333, "0", []byte("data:{\"choices\":[{\"finish_reason\":\"0\"}]}\n\n"))
	f.Add(404, "application/json", []byte(`{"error":"model \"llama9\" not found, try pulling it first"}`))
	f.Add(400, "application/json", []byte(`{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}`))
	f.Add(422, "application/json", []byte(`{"detail":[{"loc":["body","messages"],"msg":"Field required"}]}`))
	f.Add(502, "text/html", []byte("<html><body>Bad Gateway</body></html>"))
	f.Add(429, "text/plain", []byte(strings.Repeat("slow down ", 8000)))
	f.Add(200, "application/json", []byte(`{"id":"c9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"not streamed"},"finish_reason":"stop"}]}`))

	var streams sync.Map // path prefix → fuzzStream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		v, ok := streams.Load(key)
		if !ok {
			http.Error(w, "no stream for "+r.URL.Path, http.StatusTeapot)
			return
		}
		s := v.(fuzzStream)
		w.Header().Set("Content-Type", s.ctype)
		w.WriteHeader(s.status)
		fl, _ := w.(http.Flusher)
		for rest := s.body; len(rest) > 0; { // one write and flush per event, as a server streams
			ev, tail, found := bytes.Cut(rest, []byte("\n\n"))
			if found {
				ev = append(ev, '\n', '\n')
			}
			if _, err := w.Write(ev); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			rest = tail
		}
	}))
	f.Cleanup(srv.Close)
	var seq atomic.Int64
	const timeout = 5 * time.Second
	client := srv.Client() // one connection pool for every input

	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte) {
		if status < 200 || status > 599 {
			status = 200 + (status%400+400)%400
		}
		key := fmt.Sprint(seq.Add(1))
		streams.Store(key, fuzzStream{status: status, ctype: ctype, body: body})
		defer streams.Delete(key)
		m, err := New(Config{Model: "fuzz-model", BaseURL: srv.URL + "/" + key + "/v1", MaxRetries: -1, Timeout: timeout, HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		// A hang is a crash: it fails the input, which the fuzzer keeps.
		watchdog := time.AfterFunc(timeout+5*time.Second, func() {
			panic(fmt.Sprintf("Generate still running after %s on HTTP %d %q %q", timeout+5*time.Second, status, ctype, body))
		})
		defer watchdog.Stop()
		start := time.Now()
		resp, err := m.Generate(t.Context(), userSays("deploy api to staging"), func(string) {})
		if d := time.Since(start); d > timeout+2*time.Second {
			t.Fatalf("Generate took %s, past its %s timeout", d, timeout)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "openai fuzz-model: ") {
				t.Fatalf("error %q does not name the model", err)
			}
			return
		}
		if status >= 400 { // a 3xx the client does not follow is read like a 2xx
			t.Fatalf("HTTP %d answered as a response %+v", status, resp)
		}
		for i, tc := range resp.ToolCalls {
			if tc.ID == "" {
				t.Fatalf("tool call %d without an id: %+v", i, tc)
			}
			if !json.Valid(tc.Arguments) {
				t.Fatalf("tool call %d arguments %q are not JSON", i, tc.Arguments)
			}
		}
	})
}
