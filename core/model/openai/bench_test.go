package openai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchAnswer is a 209-byte answer; streamed word by word it is 35 chunks.
const benchAnswer = "Durable execution means a turn survives a crash: each model call and tool " +
	"result is journaled first, so a restarted worker replays its journal and resumes " +
	"where it stopped, never repeating a side effect twice."

// benchStream is the body OpenAI streams for benchAnswer, as it sends it
// with include_usage: a role chunk, one chunk per word, a finish chunk and a
// usage chunk, every chunk carrying the metadata OpenAI repeats.
func benchStream() []byte {
	var b bytes.Buffer
	const meta = `"id":"chatcmpl-BzQy7RkX2mV9pLwT4nE8sA1cD3fG","object":"chat.completion.chunk","created":1733500000,"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_6f2eabb9a5"`
	fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\"kq\"}\n\n", meta)
	for _, w := range strings.SplitAfter(benchAnswer, " ") {
		fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\"Zt9\"}\n\n", meta, w)
	}
	fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null,\"obfuscation\":\"p\"}\n\n", meta)
	fmt.Fprintf(&b, "data: {%s,\"choices\":[],\"usage\":{\"prompt_tokens\":412,\"completion_tokens\":38,\"total_tokens\":450,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}},\"obfuscation\":\"x2W\"}\n\n", meta)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkGenerate measures one streamed turn of benchAnswer: "loopback"
// through an httptest server that writes and flushes one event at a time (it
// includes that server's CPU), "memory" through a transport that hands the
// client the body directly, which leaves only the client's own work.
func BenchmarkGenerate(b *testing.B) {
	body := benchStream()
	if n := bytes.Count(body, []byte("\n\n")); n != 39 {
		b.Fatalf("stream has %d events, want 39", n)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for rest := body; len(rest) > 0; {
			ev, tail, _ := bytes.Cut(rest, []byte("\n\n"))
			_, _ = w.Write(ev[:len(ev)+2]) // ev is followed by "\n\n" in body
			_ = rc.Flush()
			rest = tail
		}
	}))
	b.Cleanup(srv.Close)

	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"loopback", Config{Model: "gpt-4.1-mini", BaseURL: srv.URL, HTTPClient: srv.Client()}},
		{"memory", Config{Model: "gpt-4.1-mini", BaseURL: "http://model.invalid/v1", HTTPClient: &http.Client{Transport: memoryTransport{body: body}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := New(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			req := userSays("What does durable execution mean?")
			var deltas int
			onDelta := func(string) { deltas++ }
			b.ReportAllocs()
			for b.Loop() {
				resp, err := m.Generate(b.Context(), req, onDelta)
				if err != nil {
					b.Fatal(err)
				}
				if resp.Text != benchAnswer || resp.Usage.OutputTokens != 38 {
					b.Fatalf("response = %+v", resp)
				}
			}
			if deltas == 0 {
				b.Fatal("onDelta never called")
			}
		})
	}
}
