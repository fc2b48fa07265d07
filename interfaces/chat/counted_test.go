package chat_test

import (
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
	if _, err := c.Get(gone.URL); err == nil {
		t.Fatal("a closed server answered")
	}
	want := map[string]int{"slack ok": 2, "slack rate_limited": 1, "slack client_error": 1, "slack server_error": 1, "slack unreachable": 1}
	for k, n := range want {
		if o.n[k] != n {
			t.Errorf("%s = %d, want %d (all: %v)", k, o.n[k], n, o.n)
		}
	}
}
