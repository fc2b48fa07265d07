package httptool_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tool/httptool"
)

// fuzzReply is how the fuzz endpoint answers one call.
type fuzzReply struct {
	status int
	ctype  string
	body   []byte
	mode   int // 0: Content-Length, 1: streamed without one, 2: Content-Length promising more than is sent
}

// FuzzCallResponse has the tool call an endpoint on 127.0.0.1 that answers
// with a fuzzed status, Content-Type and body, sent with a Content-Length,
// streamed, or cut short. Call returns the body (a 2xx, at most MaxContent
// bytes, the body itself when it fits; for a file's Content-Type, the
// file's description), a *core.ToolError "HTTP <code>: …"
// of at most MaxErrorBody bytes of body (any other status), or a transport
// error that never shows the URL's query; never a panic, never past its
// timeout.
func FuzzCallResponse(f *testing.F) {
	f.Add(200, "application/json", []byte(`{"deployed":"api","env":"staging"}`), uint8(0), uint8(0))
	f.Add(201, "application/json", []byte(`{"id":7}`), uint8(1), uint8(0))
	f.Add(204, "", []byte{}, uint8(0), uint8(0))
	f.Add(200, "text/plain; charset=utf-8", []byte(""), uint8(1), uint8(0))
	f.Add(503, "text/plain", []byte("deploys are frozen\n"), uint8(0), uint8(0))
	f.Add(400, "application/json", []byte(`{"error":"env must be staging"}`), uint8(0), uint8(0))
	f.Add(302, "text/html", []byte(`<a href="https://elsewhere.example/">Found</a>`), uint8(0), uint8(0))
	f.Add(200, "text/plain", []byte("é"), uint8(0), uint8(255))              // over 64 KiB, with a Content-Length
	f.Add(200, "text/plain", []byte("ab\xff\x80"), uint8(1), uint8(255))     // over 64 KiB, streamed, not UTF-8
	f.Add(500, "text/plain", []byte("\x80\x80\x80\x80"), uint8(0), uint8(9)) // an error body of continuation bytes
	f.Add(200, "application/json", []byte(`{"partial":`), uint8(2), uint8(0))
	f.Add(599, "application/problem+json", []byte(" \n\t "), uint8(1), uint8(0))
	f.Add(218, "0", []byte(" 000000000000000000000000000"), uint8('`'), uint8('a')) // a long error body after a space

	var replies sync.Map // path → fuzzReply
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := replies.Load(r.URL.Path)
		if !ok {
			http.Error(w, "no reply for "+r.URL.Path, http.StatusTeapot)
			return
		}
		rep := v.(fuzzReply)
		if rep.ctype != "" {
			w.Header().Set("Content-Type", rep.ctype)
		}
		switch rep.mode {
		case 0:
			w.Header().Set("Content-Length", strconv.Itoa(len(rep.body)))
		case 2:
			w.Header().Set("Content-Length", strconv.Itoa(len(rep.body)+10))
		}
		w.WriteHeader(rep.status)
		if rep.mode == 1 {
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write(rep.body)
	}))
	f.Cleanup(srv.Close)
	var seq atomic.Int64
	const timeout = 5 * time.Second

	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte, mode, repeat uint8) {
		rep := fuzzReply{status: 200 + abs(status)%400, ctype: ctype, mode: int(mode % 3)}
		rep.body = bytes.Repeat(body, 1+int(repeat))
		if len(rep.body) > 256<<10 {
			rep.body = rep.body[:256<<10]
		}
		path := fmt.Sprintf("/call/%d", seq.Add(1))
		replies.Store(path, rep)
		defer replies.Delete(path)
		tool, err := httptool.New(httptool.Config{URL: srv.URL + path + "?token=s3cr3t", Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := tool.Call(t.Context(), json.RawMessage(`{"service":"api"}`), "run_1:call_1")
		if d := time.Since(start); d > timeout+2*time.Second {
			t.Fatalf("Call took %s, past its %s timeout", d, timeout)
		}
		ok2xx := rep.status >= 200 && rep.status <= 299
		noBody := rep.status == http.StatusNoContent || rep.status == http.StatusNotModified
		var te *core.ToolError
		switch {
		case err == nil:
			if !ok2xx {
				t.Fatalf("HTTP %d answered as content %q", rep.status, got)
			}
			if got == "" || len(got) > httptool.MaxContent {
				t.Fatalf("HTTP %d: content of %d bytes, want 1 to %d", rep.status, len(got), httptool.MaxContent)
			}
			// The Content-Type the tool sees: net/http sniffs one from the
			// first bytes written when the endpoint sets none and has not
			// flushed its headers before the body (mode 1 does).
			ctype := rep.ctype
			if ctype == "" && rep.mode != 1 && len(rep.body) > 0 && !noBody {
				ctype = http.DetectContentType(rep.body)
			}
			switch {
			case httptool.IsFile(ctype):
				if !strings.HasPrefix(got, "[attached: ") {
					t.Fatalf("a %q answer (a file) answered as content %q, want its description", ctype, got)
				}
			case len(rep.body) == 0 || noBody:
				if want := fmt.Sprintf(`{"status":%d}`, rep.status); got != want && !noBody {
					t.Fatalf("empty body answered %q, want %q", got, want)
				}
			case rep.mode == 2:
				t.Fatalf("a body cut short answered as content %q", got)
			case len(rep.body) <= httptool.MaxContent:
				if got != string(rep.body) {
					t.Fatalf("body of %d bytes answered as %d different bytes", len(rep.body), len(got))
				}
			default:
				checkTruncated(t, got, rep.body)
			}
		case errors.As(err, &te):
			if ok2xx {
				t.Fatalf("HTTP %d answered as a tool error: %v", rep.status, err)
			}
			prefix := fmt.Sprintf("HTTP %d: ", rep.status)
			msg, found := strings.CutPrefix(te.Message, prefix)
			// An empty body is told by the status text, which an unregistered
			// code (HTTP 399) lacks.
			if !found || (msg == "" && http.StatusText(rep.status) != "") || len(msg) > httptool.MaxErrorBody {
				t.Fatalf("tool error %q: want %q and 1 to %d bytes", te.Message, prefix, httptool.MaxErrorBody)
			}
			if len(rep.body) > httptool.MaxErrorBody && rep.mode != 2 && !noBody { // a 304 carries no body
				checkTruncated(t, msg, bytes.TrimLeftFunc(rep.body, unicode.IsSpace)) // the message is trimmed
			}
		default:
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("transport error shows the query: %v", err)
			}
		}
	})
}

// checkTruncated asserts that got is a prefix of body cut at a character
// boundary, then the truncation marker.
func checkTruncated(t *testing.T, got string, body []byte) {
	t.Helper()
	kept, _, ok := strings.Cut(got, "…[truncated ")
	if !ok || !strings.HasSuffix(got, " bytes]") {
		t.Fatalf("content of a %d-byte body ends %q, want the truncation marker", len(body), got[max(0, len(got)-60):])
	}
	if !bytes.HasPrefix(body, []byte(kept)) {
		t.Fatalf("kept part of a truncated body is not its prefix")
	}
	if utf8.Valid(body) && !utf8.ValidString(kept) {
		t.Fatalf("truncation split a character")
	}
}

func abs(n int) int {
	if n < 0 {
		return -(n + 1) // -MinInt overflows
	}
	return n
}
