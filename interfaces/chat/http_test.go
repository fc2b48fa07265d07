package chat

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A webhook takes POSTs only, and bodies up to its limit: a larger one is
// refused by its declared length before a byte is read, or when its bytes
// pass the limit.
func TestWebhookRequests(t *testing.T) {
	rec := httptest.NewRecorder()
	if PostOnly(rec, httptest.NewRequest(http.MethodGet, "/hook", nil)) || rec.Code != 405 || rec.Header().Get("Allow") != "POST" {
		t.Fatalf("GET: %d, Allow %q; want 405 and Allow: POST", rec.Code, rec.Header().Get("Allow"))
	}
	read := func(body io.Reader, declared int64) (*httptest.ResponseRecorder, []byte, bool) {
		r := httptest.NewRequest(http.MethodPost, "/hook", body)
		r.ContentLength = declared
		rec := httptest.NewRecorder()
		b, ok := ReadBody(rec, r, 16)
		return rec, b, ok
	}
	if rec, b, ok := read(strings.NewReader(`{"ok":1}`), 8); !ok || string(b) != `{"ok":1}` || rec.Code != 200 {
		t.Fatalf("a small body: %q, %t, %d", b, ok, rec.Code)
	}
	never := readerFunc(func([]byte) (int, error) { t.Fatal("a body declared too large was read"); return 0, io.EOF })
	if rec, _, ok := read(never, 1<<30); ok || rec.Code != 413 {
		t.Fatalf("declared 1 GiB: %t, %d; want 413", ok, rec.Code)
	}
	if rec, _, ok := read(strings.NewReader(strings.Repeat("x", 17)), -1); ok || rec.Code != 413 {
		t.Fatalf("17 bytes of unknown length: %t, %d; want 413", ok, rec.Code)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
