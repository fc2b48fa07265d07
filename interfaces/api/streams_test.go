package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
)

// openStream starts an event stream as key; the caller closes the body.
func (e *env) openStream(ctx context.Context, key, method, path, body string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

func refusedStream(t *testing.T, resp *http.Response, setting string) {
	t.Helper()
	defer resp.Body.Close()
	var er errResp
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &er)
	if resp.StatusCode != http.StatusTooManyRequests || er.Error.Code != "too_many_streams" ||
		!strings.Contains(er.Error.Message, setting) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("stream over %s: %d %s", setting, resp.StatusCode, b)
	}
}

func TestEventStreamsAreCappedPerKeyAndInAll(t *testing.T) {
	const admin, viewer, operator = "admin-key-0123456789", "viewer-key-0123456789", "operator-key-0123456789"
	e := newEnvWith(t, func(c *api.Config) { c.MaxStreams, c.MaxStreamsPerKey = 3, 2 }, admin, viewer, operator)

	// A run waiting behind a paused one in its session stays queued, so
	// streams of it stay open.
	var paused, queued runResp
	e.call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"deploy web to staging"}`, &paused)
	if paused.Status != core.RunPaused {
		t.Fatalf("first run = %+v", paused)
	}
	e.call("POST", "/api/v1/agents/demo/runs", `{"input":"hello","session_id":"`+paused.SessionID+`"}`, &queued)
	events := "/api/v1/runs/" + queued.ID + "/events"

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	a1 := e.openStream(first, admin, "GET", events, "")
	a2 := e.openStream(ctx, admin, "GET", events, "")
	defer a2.Body.Close()
	for _, r := range []*http.Response{a1, a2} {
		if r.StatusCode != 200 {
			t.Fatalf("stream within the caps: %d", r.StatusCode)
		}
	}
	refusedStream(t, e.openStream(ctx, admin, "GET", events, ""), "server.max_streams_per_key")
	// A refused streaming POST starts no run.
	var before core.Page[core.Run]
	e.call("GET", "/api/v1/sessions/"+paused.SessionID+"/runs", "", &before)
	refusedStream(t, e.openStream(ctx, admin, "POST", "/api/v1/agents/demo/runs", `{"input":"hi","session_id":"`+paused.SessionID+`"}`),
		"server.max_streams_per_key")
	var after core.Page[core.Run]
	e.call("GET", "/api/v1/sessions/"+paused.SessionID+"/runs", "", &after)
	if len(after.Items) != len(before.Items) {
		t.Fatalf("a refused stream started a run: %d runs, then %d", len(before.Items), len(after.Items))
	}

	v := e.openStream(ctx, viewer, "GET", events, "") // another key: the third stream in all
	defer v.Body.Close()
	if v.StatusCode != 200 {
		t.Fatalf("viewer's stream: %d", v.StatusCode)
	}
	refusedStream(t, e.openStream(ctx, operator, "GET", events, ""), "server.max_streams")

	// A stream that ends gives its slot back.
	cancelFirst()
	a1.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.openStream(ctx, operator, "GET", events, "")
		code := r.StatusCode
		r.Body.Close()
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not given back: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
