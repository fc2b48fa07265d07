package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/interfaces/api"
)

// raw sends a request with the headers given and returns the status and
// the error code of the answer.
func (e *env) raw(method, path, body string, hdr map[string]string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var er errResp
	_ = json.Unmarshal(b, &er)
	return resp.StatusCode, er.Error.Code + " " + er.Error.Message
}

const runPath = "/api/v1/agents/demo/runs?wait=true"

// What a web page could make a browser send to a gateway open on loopback
// is refused before it reaches a route, and changes nothing.
func TestHostilePageRefused(t *testing.T) {
	e := newEnv(t) // open: no keys
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"Content-Type": "application/json"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name         string
		method, path string
		body         string
		hdr          map[string]string
		code         int
		errCode      string
	}{
		{"text/plain POST (a form or fetch without preflight)", "POST", runPath, `{"input":"hi"}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"form POST", "POST", runPath, `input=hi`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"POST without a type", "POST", runPath, `{"input":"hi"}`, nil, 415, "unsupported_media_type"},
		{"DNS rebinding: a foreign Host", "POST", runPath, `{"input":"hi"}`, with("Host", "evil.example:8080"), 421, "host_not_allowed"},
		{"a foreign Host reading", "GET", "/api/v1/runs?limit=5", "", with("Host", "evil.example"), 421, "host_not_allowed"},
		{"cross-site fetch", "POST", runPath, `{"input":"hi"}`, with("Sec-Fetch-Site", "cross-site"), 403, "cross_site"},
		{"an Origin that is not the Host", "POST", runPath, `{"input":"hi"}`, with("Origin", "https://evil.example"), 403, "cross_site"},
		{"cross-site decision", "POST", "/api/v1/approvals/apr_x/decision", `{"decision":"approve"}`, with("Sec-Fetch-Site", "cross-site"), 403, "cross_site"},
		{"through a tunnel (ngrok, cloudflared)", "POST", runPath, `{"input":"hi"}`, with("X-Forwarded-For", "203.0.113.9"), 403, "proxied"},
		{"through a proxy reading", "GET", "/api/v1/audit", "", with("Forwarded", "for=203.0.113.9"), 403, "proxied"},
		{"trailing garbage", "POST", runPath, `{"input":"hi"} trailing`, jsonCT, 400, "bad_request"},
		{"two JSON values", "POST", runPath, `{"input":"hi"}{"input":"again"}`, jsonCT, 400, "bad_request"},
		{"oversize body", "POST", runPath, `{"input":"` + strings.Repeat("a", api.MaxBody) + `"}`, jsonCT, 413, "body_too_large"},
		{"a bad cursor", "GET", "/api/v1/sessions?cursor=not-a-cursor", "", nil, 400, "bad_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, got := e.raw(c.method, c.path, c.body, c.hdr)
			if code != c.code || !strings.HasPrefix(got, c.errCode+" ") {
				t.Errorf("%d %q, want %d %s", code, got, c.code, c.errCode)
			}
		})
	}
	var runs struct{ Items []any }
	if e.call("GET", "/api/v1/runs", "", &runs); len(runs.Items) != 0 {
		t.Errorf("refused requests started %d runs", len(runs.Items))
	}
	// What programs send is served: loopback names, same-origin pages.
	for _, hdr := range []map[string]string{
		with("Host", "localhost"), with("Host", "127.0.0.1:1234"), with("Host", "[::1]:80"),
		with("Sec-Fetch-Site", "same-origin"), with("Sec-Fetch-Site", "none"),
	} {
		if code, got := e.raw("POST", runPath, `{"input":"hi"}`, hdr); code != 200 {
			t.Errorf("%v: %d %q, want 200", hdr, code, got)
		}
	}
}

// server.allowed_hosts names the hosts a gateway answers besides loopback;
// with keys and no list any Host is served (the key is the guard).
func TestAllowedHosts(t *testing.T) {
	listed := newEnvWith(t, func(c *api.Config) { c.AllowedHosts = []string{"agentgate.internal"} })
	if code, _ := listed.raw("GET", "/api/v1/agents", "", map[string]string{"Host": "AgentGate.internal:8080"}); code != 200 {
		t.Errorf("a listed host: %d, want 200", code)
	}
	if code, _ := listed.raw("GET", "/api/v1/agents", "", map[string]string{"Host": "other.internal"}); code != 421 {
		t.Errorf("an unlisted host: %d, want 421", code)
	}
	keyed := newEnv(t, "k-admin-0123456789abcdef")
	if code, _ := keyed.raw("GET", "/api/v1/agents", "", map[string]string{"Host": "agentgate.example.com", "X-Forwarded-For": "203.0.113.9"}); code != 200 {
		t.Errorf("with keys, any host, through a proxy: %d, want 200", code)
	}
}

// With keys, /metrics needs one; /readyz answers probes without a key but
// tells why it is not ready only to a key.
func TestOpsEndpointsWithKeys(t *testing.T) {
	const admin = "k-admin-0123456789abcdef"
	e := newEnvWith(t, func(c *api.Config) {
		c.Ready = func(context.Context) error { return errors.New("database is down: secret detail") }
	}, admin)
	anon := *e
	anon.key = ""
	if code, _ := anon.raw("GET", "/metrics", "", nil); code != 401 {
		t.Errorf("/metrics without a key: %d, want 401", code)
	}
	if code, _ := e.raw("GET", "/metrics", "", nil); code != 200 {
		t.Errorf("/metrics with a key: %d, want 200", code)
	}
	if code, got := anon.raw("GET", "/readyz", "", nil); code != 503 || strings.Contains(got, "secret") {
		t.Errorf("/readyz without a key: %d %q, want 503 without the reason", code, got)
	}
	if code, got := e.raw("GET", "/readyz", "", nil); code != 503 || !strings.Contains(got, "database is down") {
		t.Errorf("/readyz with a key: %d %q, want 503 with the reason", code, got)
	}
	if code, _ := anon.raw("GET", "/healthz", "", nil); code != 200 {
		t.Errorf("/healthz: %d, want 200", code)
	}
}

// A body naming a key twice is refused: decoding would keep the last value
// where a proxy's log or another reader may keep the first, so a decision
// could read as a deny there and approve here. Keys match ignoring case,
// as they do the fields.
func TestRepeatedKeysRefused(t *testing.T) {
	e := newEnv(t)
	var run runResp
	if code := e.call("POST", runPath, `{"input":"deploy web to staging"}`, &run); code != 200 || len(run.PendingApprovals) != 1 {
		t.Fatalf("starting a run: %d %+v", code, run)
	}
	decision := "/api/v1/approvals/" + run.PendingApprovals[0].ID + "/decision"
	jsonCT := map[string]string{"Content-Type": "application/json"}
	for _, body := range []string{
		`{"decision":"deny","decision":"approve"}`,
		`{"decision":"deny","Decision":"approve"}`,
		`{"decision":"deny","DECISION":"approve"}`,
		`{"decision":"approve","reason":"a","reaſon":"b"}`, // ſ folds to s, as encoding/json matches it
	} {
		code, got := e.raw("POST", decision, body, jsonCT)
		if code != 400 || !strings.HasPrefix(got, "bad_request ") || !strings.Contains(got, "twice") {
			t.Errorf("%s: %d %q, want 400 naming the repeated key", body, code, got)
		}
	}
	var a struct{ Status string }
	if e.call("GET", "/api/v1/approvals/"+run.PendingApprovals[0].ID, "", &a); a.Status != "pending" {
		t.Fatalf("approval after the refused decisions: %s, want pending", a.Status)
	}
	if code, got := e.raw("POST", decision, `{"decision":"approve","reason":"ok"}`, jsonCT); code != 200 {
		t.Fatalf("a well-formed decision: %d %q", code, got)
	}
}
