package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A gateway that redirects does not get the CLI's key (or its request)
// sent on: Go would follow it to another port or scheme of the host with
// the Authorization header. The CLI says where it pointed.
func TestCLIDoesNotFollowRedirects(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"items": []any{}})
	}))
	defer other.Close()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer gw.Close()
	var out, errs bytes.Buffer
	err := run(t.Context(), []string{"approvals", "list", "--server", gw.URL, "--api-key", "SECRET-KEY-0123456789"}, strings.NewReader(""), &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "redirect to "+other.URL) {
		t.Errorf("approvals list through a redirect: %v, want an error naming where it pointed", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Errorf("the redirect's target got %d requests (Authorization %q)", len(leaked), leaked)
	}
}

// A gateway whose pages never end (the same cursor again and again) is
// not read until the CLI runs out of memory.
// A server that answers without end gets an error, not a CLI that reads
// it all into memory.
func TestCLIRefusesAnAnswerWithoutEnd(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"items":[`)
		chunk := []byte(strings.Repeat(`{"id":"nightly"},`, 4096))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer gw.Close()
	var out, errs bytes.Buffer
	err := run(t.Context(), []string{"routines", "list", "--server", gw.URL}, strings.NewReader(""), &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "with more than 64 MiB; not read") {
		t.Errorf("routines list: %v, want the answer refused", err)
	}
}

func TestCLIStopsAtARepeatedCursor(t *testing.T) {
	var mu sync.Mutex
	pages := 0
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pages++
		cursor := "c"
		if pages > 50 { // an end, for a CLI that would read on
			cursor = ""
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"items": []map[string]any{{"id": "nightly"}}, "next_cursor": cursor})
	}))
	defer gw.Close()
	var out, errs bytes.Buffer
	err := run(t.Context(), []string{"routines", "list", "--server", gw.URL}, strings.NewReader(""), &out, &errs)
	if err == nil || !strings.Contains(err.Error(), `sent the page cursor "c" twice`) {
		t.Errorf("routines list: %v, want the repeated cursor refused", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if pages != 2 {
		t.Errorf("read %d pages, want 2", pages)
	}
}
