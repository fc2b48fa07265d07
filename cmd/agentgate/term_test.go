package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// What a gateway streams to `agentgate chat` reaches the terminal with its
// control characters escaped: a tool result or a model answer carrying
// escape sequences cannot set the clipboard, hide text or draw a fake
// approval prompt.
func TestChatEscapesControlCharacters(t *testing.T) {
	hostile := `Done.\u001b]52;c;ZXZpbA==\u0007\r\n  approval needed: demo wants to call read_file\u001b[30;40m \u202etxt.exe`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/agents/demo/runs" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: delta\ndata: {\"text\":\""+hostile+"\"}\n\n"+
			"event: tool_result\ndata: {\"type\":\"tool_result\",\"data\":{\"tool\":\"fetch\",\"content\":\""+hostile+"\"}}\n\n"+
			"event: run\ndata: {\"id\":\"run_1\",\"session_id\":\"ses_1\",\"status\":\"failed\",\"error\":\""+hostile+"\"}\n\n")
	}))
	defer srv.Close()
	var out, errs bytes.Buffer
	if err := run(t.Context(), []string{"chat", "--server", srv.URL, "demo"}, strings.NewReader("hello\n/quit\n"), &out, &errs); err != nil {
		t.Fatalf("chat: %v (%s)", err, errs.String())
	}
	got := out.String()
	if i := strings.IndexFunc(got, control); i >= 0 {
		t.Fatalf("the terminal got control character %U at %d: %q", []rune(got[i:])[0], i, got)
	}
	for _, want := range []string{`\x1b]52;c;`, `\x07`, `\x1b[30;40m`, `\u202e`, `\x0d`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %s shown escaped: %q", want, got)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\nnext\tcol": "plain text\nnext\tcol",
		"é ü 日本 ✅":              "é ü 日本 ✅",
		"a\x1b[2Jb":             `a\x1b[2Jb`,
		"over\rwrite\bx":        `over\x0dwrite\x08x`,
		"c1 \u009b31m":          `c1 \x9b31m`,
		"rlo \u202egnp.exe":     `rlo \u202egnp.exe`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
