package slacktest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
)

func post(t *testing.T, s *slacktest.Server, method, contentType, body, bearer string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.APIURL()+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

func TestServerWireFormat(t *testing.T) {
	t.Parallel()
	s := slacktest.New(t)
	form := "application/x-www-form-urlencoded"

	// JSON body with a bearer token.
	_, _, out := post(t, s, "chat.postMessage", "application/json; charset=utf-8",
		`{"channel":"C1","text":"hi","blocks":[{"type":"divider"}]}`, s.Token)
	ts, _ := out["ts"].(string)
	if out["ok"] != true || ts == "" {
		t.Fatalf("postMessage = %v", out)
	}
	// Form body with the token as an argument.
	_, _, out = post(t, s, "chat.update", form, url.Values{"token": {s.Token}, "channel": {"C1"}, "ts": {ts}, "text": {"edited"}}.Encode(), "")
	if out["ok"] != true {
		t.Fatalf("update = %v", out)
	}
	m, _ := s.Message("C1", ts)
	if m.Text != "edited" || string(m.Blocks) != `[{"type":"divider"}]` {
		t.Errorf("message = %+v", m)
	}

	for _, tc := range []struct{ bearer, want string }{{"", "not_authed"}, {"xoxb-nope", "invalid_auth"}} {
		if _, _, out := post(t, s, "auth.test", form, "", tc.bearer); out["ok"] != false || out["error"] != tc.want {
			t.Errorf("auth.test with %q = %v, want %s", tc.bearer, out, tc.want)
		}
	}
	if _, _, out := post(t, s, "chat.update", form, "channel=C1&ts=1.2&text=x", s.Token); out["error"] != "message_not_found" {
		t.Errorf("update of unknown message = %v", out)
	}

	s.RateLimit("chat.postMessage", 7, 1)
	status, h, out := post(t, s, "chat.postMessage", form, "channel=C1&text=x", s.Token)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "7" || out["ok"] != false {
		t.Errorf("rate limited = %d %v %v", status, h, out)
	}
	s.ServerError("chat.postMessage", http.StatusInternalServerError, 1)
	if status, _, _ := post(t, s, "chat.postMessage", form, "channel=C1&text=x", s.Token); status != http.StatusInternalServerError {
		t.Errorf("status = %d, want 500", status)
	}
	s.Error("chat.postMessage", "is_archived", 1)
	if _, _, out := post(t, s, "chat.postMessage", form, "channel=C1&text=x", s.Token); out["error"] != "is_archived" {
		t.Errorf("injected error = %v", out)
	}
	if _, _, out := post(t, s, "chat.postMessage", form, "channel=C1&text=x", s.Token); out["ok"] != true {
		t.Errorf("after the faults = %v, want ok", out)
	}
	if n := len(s.Messages("C1")); n != 2 {
		t.Errorf("messages = %d, want 2", n)
	}
	calls := s.Calls("chat.postMessage")
	if len(calls) != 5 || calls[1].Status != 429 || calls[2].Status != 500 || calls[3].Error != "is_archived" || !calls[0].JSON {
		t.Errorf("calls = %+v", calls)
	}
}

// The example from Slack's "Verifying requests from Slack" guide.
func TestSignatureMatchesSlackExample(t *testing.T) {
	t.Parallel()
	body := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	const want = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	req := slacktest.SignedRequest("8f742231b10e8888abcd99yyyzzz85a5", []byte(body), time.Unix(1531420618, 0))
	if got := req.Header.Get("X-Slack-Signature"); got != want {
		t.Errorf("signature = %s, want %s", got, want)
	}
	if req.Header.Get("X-Slack-Request-Timestamp") != "1531420618" || req.URL.Path != "/slack/events" || req.Method != http.MethodPost {
		t.Errorf("request = %s %s %v", req.Method, req.URL, req.Header)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("content type = %s", ct)
	}
}

func TestServerFiles(t *testing.T) {
	t.Parallel()
	s := slacktest.New(t)
	form := "application/x-www-form-urlencoded"
	get := func(u, bearer string) (int, string, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}

	f := s.AddFile("photo 1.png", "image/png", []byte("\x89PNG..."))
	if f["name"] != "photo 1.png" || f["filetype"] != "png" || f["size"] != 7 || f["url_private"] == f["url_private_download"] {
		t.Errorf("file object = %v", f)
	}
	for _, tc := range []struct {
		bearer string
		status int
	}{{"", http.StatusNotFound}, {"xoxb-nope", http.StatusNotFound}, {s.Token, http.StatusOK}} {
		for _, field := range []string{"url_private", "url_private_download"} {
			status, ct, body := get(f[field].(string), tc.bearer)
			if status != tc.status || (status == http.StatusOK && (ct != "image/png" || string(body) != "\x89PNG...")) {
				t.Errorf("GET %s with %q = %d %s %q, want %d", field, tc.bearer, status, ct, body, tc.status)
			}
		}
	}

	// files.uploadV2: get an upload URL, POST the raw bytes, complete in a thread.
	_, _, out := post(t, s, "files.getUploadURLExternal", form, "filename=notes.txt&length=5", s.Token)
	upload, _ := out["upload_url"].(string)
	id, _ := out["file_id"].(string)
	if out["ok"] != true || upload == "" || id == "" {
		t.Fatalf("getUploadURLExternal = %v", out)
	}
	if _, _, out := post(t, s, "files.getUploadURLExternal", form, "filename=notes.txt&length=0", s.Token); out["error"] != "missing_argument" {
		t.Errorf("getUploadURLExternal with length 0 = %v", out)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, upload, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ack, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(ack) != "OK - 5" {
		t.Errorf("upload = %d %q, want 200 OK - 5", resp.StatusCode, ack)
	}
	files := `[{"id":"` + id + `","title":"Notes"}]`
	_, _, out = post(t, s, "files.completeUploadExternal", form, url.Values{"files": {files}, "channel_id": {"C1"}, "thread_ts": {"1.2"}}.Encode(), s.Token)
	shared, _ := out["files"].([]any)
	if out["ok"] != true || len(shared) != 1 {
		t.Fatalf("completeUploadExternal = %v", out)
	}
	if _, _, out := post(t, s, "files.completeUploadExternal", form, url.Values{"files": {files}}.Encode(), s.Token); out["error"] != "file_not_found" {
		t.Errorf("completing twice = %v, want file_not_found", out)
	}
	if ups := s.Uploads(); len(ups) != 1 || ups[0].Channel != "C1" || ups[0].ThreadTS != "1.2" || ups[0].Name != "notes.txt" || ups[0].Title != "Notes" || string(ups[0].Data) != "hello" {
		t.Errorf("uploads = %+v", ups)
	}
	if r := s.Replies("C1", "1.2"); len(r) != 1 || len(r[0].Files) != 1 || r[0].Files[0].ID != id {
		t.Errorf("thread = %+v, want one message sharing %s", r, id)
	}
	dl, _ := shared[0].(map[string]any)["url_private_download"].(string)
	if status, _, body := get(dl, s.Token); status != http.StatusOK || string(body) != "hello" {
		t.Errorf("GET uploaded file = %d %q", status, body)
	}
}
