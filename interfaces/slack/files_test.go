package slack

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
)

// countingTransport records the requests a client sends and how many body bytes it reads.
// With hideLength it drops Content-Length from answers, as a chunked answer would.
type countingTransport struct {
	hideLength bool

	mu   sync.Mutex
	urls []string
	read int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.urls = append(t.urls, req.URL.String())
	t.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if t.hideLength {
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

func (t *countingTransport) requests() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.urls...)
}

func (t *countingTransport) bytesRead() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.read
}

type countingBody struct {
	io.ReadCloser
	t *countingTransport
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.t.mu.Lock()
	b.t.read += int64(n)
	b.t.mu.Unlock()
	return n, err
}

func TestClientDownload(t *testing.T) {
	t.Parallel()
	small := []byte("%PDF-1.7 quarterly report")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	const limit = 1 << 10
	for _, tc := range []struct {
		name       string
		data       []byte
		max        int64
		hideLength bool
		token      string
		field      string // url_private_download or url_private
		wantErr    string
	}{
		{name: "download url", data: small, max: limit, field: "url_private_download"},
		{name: "private url", data: small, max: limit, field: "url_private"},
		{name: "exactly the limit", data: big[:limit], max: limit, field: "url_private_download"},
		{name: "too large by Content-Length", data: big, max: limit, field: "url_private_download", wantErr: "1024 bytes"},
		{name: "too large while reading", data: big, max: limit, hideLength: true, field: "url_private_download", wantErr: "1024 bytes"},
		{name: "token cannot read it", data: small, max: limit, token: "xoxb-other", field: "url_private_download", wantErr: "http_404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := slacktest.New(t)
			tr := &countingTransport{hideLength: tc.hideLength}
			c, _ := newTestClient(t, fake, ClientConfig{Token: tc.token, HTTPClient: &http.Client{Transport: tr}})
			file := fake.AddFile("report.pdf", "application/pdf", tc.data)
			if file["size"] != len(tc.data) || file["mimetype"] != "application/pdf" || !strings.HasPrefix(file["id"].(string), "F") {
				t.Errorf("file object = %v", file)
			}

			got, err := c.Download(t.Context(), file[tc.field].(string), tc.max)
			if tc.wantErr == "" {
				if err != nil || !bytes.Equal(got, tc.data) {
					t.Fatalf("Download = %d bytes, %v; want the %d bytes added", len(got), err, len(tc.data))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Download err = %v, want one naming %q", err, tc.wantErr)
			}
			if len(tc.data) > limit {
				if !errors.Is(err, chat.ErrFileTooLarge) {
					t.Errorf("err = %v, want ErrFileTooLarge", err)
				}
				if n := tr.bytesRead(); n > tc.max+1 {
					t.Errorf("read %d bytes of a refused file, want at most %d", n, tc.max+1)
				}
				if n := len(tr.requests()); n != 1 {
					t.Errorf("requests = %d, want 1 (a refused size is not retried)", n)
				}
			}
		})
	}
}

func TestClientDownloadRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	tr := &countingTransport{}
	c, _ := newTestClient(t, fake, ClientConfig{HTTPClient: &http.Client{Transport: tr}})
	file := fake.AddFile("a.txt", "text/plain", []byte("secret"))
	path := strings.TrimPrefix(file["url_private_download"].(string), fake.URL)
	for _, u := range []string{
		"https://evil.example" + path,
		"http://files.slack.com" + path,
		"https://files.slack.com.evil.example" + path,
		"https://slack.com.evil.example" + path,
		"https://" + strings.TrimPrefix(fake.URL, "http://") + path, // the API host with another scheme
		"http://xoxb:pw@" + strings.TrimPrefix(fake.URL, "http://") + path,
		fake.URL + "/api/conversations.history?channel=C1", // a Web API method, not a file
		fake.URL + "/files-pri/../api/auth.test",
		path,
		"",
	} {
		if _, err := c.Download(t.Context(), u, 1<<20); err == nil {
			t.Errorf("Download(%q) = nil error, want a refusal", u)
		}
	}
	if reqs := tr.requests(); len(reqs) != 0 {
		t.Errorf("requests sent = %v, want none", reqs)
	}
}

// fileTransport answers every request with a file's bytes, recording the Authorization
// header; with refuse it fails the test instead: the URL must be refused before any request.
type fileTransport struct {
	t      *testing.T
	refuse bool

	mu   sync.Mutex
	auth []string
}

func (f *fileTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.refuse {
		f.t.Errorf("request to %s sent, want it refused before any request", req.URL)
		return nil, errors.New("refused URL requested")
	}
	f.mu.Lock()
	f.auth = append(f.auth, req.Header.Get("Authorization"))
	f.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader("file bytes")), ContentLength: int64(len("file bytes"))}, nil
}

// The bot token goes to files.slack.com only; with Slack's API host it never goes to
// slack.com (a file URL naming a Web API method would have the bot read a channel for
// whoever forged it), and with SLACK_API_URL elsewhere it goes to that host but never
// under its API path.
func TestClientDownloadKeepsTokenOffWebAPI(t *testing.T) {
	t.Parallel()
	const proxy = "https://proxy.example/slack/api/"
	for _, tc := range []struct {
		apiURL, url string
		ok          bool
	}{
		{"", "https://files.slack.com/files-pri/T1-F1/download/report.pdf", true},
		{"", "https://slack.com/api/conversations.history?channel=C0123456789", false},
		{"", "https://slack.com/files-pri/T1-F1/download/report.pdf", false},
		{"", "https://SLACK.com/api/auth.test", false},
		{"", "https://acme.slack.com/files-pri/T1-F1/report.pdf", false},
		{"https://slack.com", "https://slack.com/files-pri/T1-F1/report.pdf", false},
		{proxy, "https://files.slack.com/files-pri/T1-F1/report.pdf", true},
		{proxy, "https://proxy.example/files-pri/T1-F1/report.pdf", true},
		{proxy, "https://proxy.example/slack/api/conversations.history?channel=C0123456789", false},
		{proxy, "https://proxy.example/slack/api", false},
		{proxy, "https://proxy.example/slack/API/auth.test", false},
		{proxy, "https://proxy.example/slack//api/auth.test", false},
		{proxy, "https://proxy.example/slack/api%2Fauth.test", false},
		{proxy, "https://proxy.example/files-pri/../slack/api/auth.test", false},
	} {
		t.Run(cmp.Or(tc.apiURL, "default")+" "+tc.url, func(t *testing.T) {
			t.Parallel()
			tr := &fileTransport{t: t, refuse: !tc.ok}
			c, err := NewClient(ClientConfig{Token: "xoxb-secret", APIURL: tc.apiURL, HTTPClient: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Download(t.Context(), tc.url, 1<<10)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "refusing to send the bot token") {
					t.Errorf("Download = %q, %v; want a refusal", got, err)
				}
				return
			}
			if err != nil || string(got) != "file bytes" {
				t.Fatalf("Download = %q, %v; want the file", got, err)
			}
			if len(tr.auth) != 1 || tr.auth[0] != "Bearer xoxb-secret" {
				t.Errorf("Authorization headers = %q, want the bot token once", tr.auth)
			}
		})
	}
}

func TestClientUpload(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, _ := newTestClient(t, fake, ClientConfig{})
	data := []byte("day,revenue\n1,100\n2,150\n")

	if err := c.Upload(t.Context(), "C1", "1700000000.000001", "revenue.csv", "Revenue", data); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	ups := fake.Uploads()
	if len(ups) != 1 {
		t.Fatalf("uploads = %+v, want 1", ups)
	}
	want := slacktest.Upload{Channel: "C1", ThreadTS: "1700000000.000001", Name: "revenue.csv", Title: "Revenue", Data: data}
	if u := ups[0]; u.Channel != want.Channel || u.ThreadTS != want.ThreadTS || u.Name != want.Name || u.Title != want.Title || !bytes.Equal(u.Data, want.Data) {
		t.Errorf("upload = %+v, want %+v", u, want)
	}
	replies := fake.Replies("C1", "1700000000.000001")
	if len(replies) != 1 || len(replies[0].Files) != 1 || replies[0].Files[0].Name != "revenue.csv" || !bytes.Equal(replies[0].Files[0].Data, data) {
		t.Errorf("thread = %+v, want one message sharing revenue.csv", replies)
	}

	get := fake.Calls("files.getUploadURLExternal")
	if len(get) != 1 || get[0].Args["filename"] != "revenue.csv" || get[0].Args["length"] != strconv.Itoa(len(data)) || !get[0].Bearer {
		t.Errorf("getUploadURLExternal calls = %+v", get)
	}
	done := fake.Calls("files.completeUploadExternal")
	if len(done) != 1 {
		t.Fatalf("completeUploadExternal calls = %+v, want 1", done)
	}
	var files []map[string]string
	if err := json.Unmarshal([]byte(done[0].Args["files"]), &files); err != nil || len(files) != 1 || files[0]["title"] != "Revenue" || files[0]["id"] == "" {
		t.Errorf("files argument = %s, want one {id, title}", done[0].Args["files"])
	}
	if a := done[0].Args; a["channel_id"] != "C1" || a["thread_ts"] != "1700000000.000001" {
		t.Errorf("completeUploadExternal args = %v", a)
	}

	// Slack refuses an empty file; the client does not ask.
	if err := c.Upload(t.Context(), "C1", "", "empty.txt", "", nil); err == nil {
		t.Errorf("Upload of an empty file = nil error, want one")
	}
	if n := len(fake.Calls("files.getUploadURLExternal")); n != 1 {
		t.Errorf("getUploadURLExternal calls = %d, want 1 (none for the empty file)", n)
	}
}

func TestClientUploadFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		setup       func(*slacktest.Server)
		channel     string
		maybePosted bool
		code        string
		uploads     int
	}{
		{name: "answer lost after sharing", channel: "C1", maybePosted: true, uploads: 1, setup: func(s *slacktest.Server) {
			s.Fail("files.completeUploadExternal", slacktest.Fault{Status: http.StatusBadGateway, Commit: true}, 1)
		}},
		{name: "500 before sharing", channel: "C1", maybePosted: true, setup: func(s *slacktest.Server) {
			s.ServerError("files.completeUploadExternal", http.StatusInternalServerError, 1)
		}},
		{name: "unknown channel", channel: "C2", code: "channel_not_found", setup: func(s *slacktest.Server) { s.Channels("C1") }},
		{name: "uploads disabled", channel: "C1", code: "file_uploads_disabled", setup: func(s *slacktest.Server) {
			s.Error("files.getUploadURLExternal", "file_uploads_disabled", 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := slacktest.New(t)
			c, _ := newTestClient(t, fake, ClientConfig{})
			tc.setup(fake)

			err := c.Upload(t.Context(), tc.channel, "", "chart.png", "", []byte("\x89PNG"))
			if errors.Is(err, ErrMaybePosted) != tc.maybePosted {
				t.Errorf("err = %v, maybe posted = %v, want %v", err, errors.Is(err, ErrMaybePosted), tc.maybePosted)
			}
			if tc.code != "" && !isCode(err, tc.code) {
				t.Errorf("err = %v, want an APIError %s", err, tc.code)
			}
			if tc.maybePosted {
				if n := len(fake.Calls("files.completeUploadExternal")); n != 1 {
					t.Errorf("completeUploadExternal calls = %d, want 1 (no retry)", n)
				}
			}
			if n := len(fake.Uploads()); n != tc.uploads {
				t.Errorf("uploads = %d, want %d", n, tc.uploads)
			}
		})
	}
}
