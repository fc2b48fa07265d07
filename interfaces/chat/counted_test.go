package chat_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/interfaces/chat"
)

type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) PlatformCall(platform, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[platform+" "+outcome]++
}

// Every request to a platform's API is counted by what came back.
func TestCountedOutcomes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("ok") != "" { // as Slack refuses a call: 200 and ok false
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = io.WriteString(w, `{"ok":`+r.URL.Query().Get("ok")+`,"error":"channel_not_found"}`)
			return
		}
		code, _ := strconv.Atoi(r.URL.Query().Get("status"))
		w.WriteHeader(code)
	}))
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there now
	o := &calls{n: map[string]int{}}
	c := &http.Client{Transport: chat.Counted(chat.PlatformSlack, nil, o)}
	for _, status := range []int{200, 200, 429, 404, 503} {
		resp, err := c.Get(srv.URL + "/api?status=" + strconv.Itoa(status))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, ok := range []string{"false", "true"} {
		resp, err := c.Get(srv.URL + "/api?ok=" + ok)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `{"ok":` + ok + `,"error":"channel_not_found"}`; string(body) != want {
			t.Fatalf("body read through the counter = %q, want %q", body, want)
		}
	}
	if _, err := c.Get(gone.URL); err == nil {
		t.Fatal("a closed server answered")
	}
	want := map[string]int{"slack ok": 3, "slack rate_limited": 1, "slack client_error": 2, "slack server_error": 1, "slack unreachable": 1}
	for k, n := range want {
		if o.n[k] != n {
			t.Errorf("%s = %d, want %d (all: %v)", k, o.n[k], n, o.n)
		}
	}
}
