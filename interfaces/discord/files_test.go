package discord_test

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/discord"
	"github.com/agentgate/agentgate/interfaces/discord/discordtest"
)

// countingTransport records the requests a client sends and how many body
// bytes it reads; with hideLength it drops Content-Length from answers, as
// a chunked answer would.
type countingTransport struct {
	next       http.RoundTripper
	hideLength bool

	mu   sync.Mutex
	reqs []*http.Request
	read int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.reqs = append(t.reqs, req)
	t.mu.Unlock()
	resp, err := t.next.RoundTrip(req)
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

func (t *countingTransport) requests() []*http.Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*http.Request(nil), t.reqs...)
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

// newFileClient is a client of a new fake whose downloads go through tr.
func newFileClient(t *testing.T, tr *countingTransport) (*discordtest.Server, *discord.Client) {
	t.Helper()
	fake := discordtest.NewServer()
	t.Cleanup(fake.Close)
	c, err := discord.NewClient(discord.ClientConfig{Token: discordtest.Token, APIURL: fake.APIURL(), CDNURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	if tr != nil {
		tr.next = http.DefaultTransport
		discord.SetDownloadTransport(c, tr)
	}
	return fake, c
}

func TestDownload(t *testing.T) {
	t.Parallel()
	small := []byte("%PDF-1.7 runbook")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	const limit = 1 << 10
	for _, tc := range []struct {
		name       string
		data       []byte
		field      string // url or proxy_url
		alter      func(string) string
		hideLength bool
		wantErr    string
	}{
		{name: "url", data: small, field: "url"},
		{name: "proxy url", data: small, field: "proxy_url"},
		{name: "exactly the limit", data: big[:limit], field: "url"},
		{name: "too large by Content-Length", data: big, field: "url", wantErr: "1024 bytes"},
		{name: "too large while reading", data: big, field: "url", hideLength: true, wantErr: "1024 bytes"},
		{name: "signature altered", data: small, field: "url", wantErr: "HTTP 404",
			alter: func(u string) string { return strings.Replace(u, "hm=", "hm=00", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := &countingTransport{hideLength: tc.hideLength}
			fake, c := newFileClient(t, tr)
			att := fake.AddAttachment("runbook.pdf", "application/pdf", tc.data)
			if att["filename"] != "runbook.pdf" || att["content_type"] != "application/pdf" || att["size"] != len(tc.data) || att["id"] == "" {
				t.Errorf("attachment = %v", att)
			}
			u := att[tc.field].(string)
			if tc.alter != nil {
				u = tc.alter(u)
			}

			got, err := c.Download(t.Context(), u, limit)
			for _, r := range tr.requests() {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("download sent Authorization %q, want none", r.Header.Get("Authorization"))
				}
			}
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
				if n := tr.bytesRead(); n > limit+1 {
					t.Errorf("read %d bytes of a refused file, want at most %d", n, limit+1)
				}
			}
		})
	}
}

func TestDownloadRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	tr := &countingTransport{}
	fake, c := newFileClient(t, tr)
	att := fake.AddAttachment("a.txt", "text/plain", []byte("hello"))
	path := strings.TrimPrefix(att["url"].(string), fake.URL)
	hostPort := strings.TrimPrefix(fake.URL, "http://")
	for _, u := range []string{
		"https://evil.example" + path,
		"http://cdn.discordapp.com" + path, // not https
		"https://cdn.discordapp.com.evil.example" + path,
		"https://discord.com" + path,
		"https://" + hostPort + path, // the allowed base with another scheme
		"http://user:pw@" + hostPort + path,
		"http://169.254.169.254/latest/meta-data/",
		path,
		"",
	} {
		if _, err := c.Download(t.Context(), u, 1<<20); err == nil {
			t.Errorf("Download(%q) = nil error, want a refusal", u)
		}
	}
	if reqs := tr.requests(); len(reqs) != 0 {
		t.Errorf("requests sent = %d (first %s), want none", len(reqs), reqs[0].URL)
	}

	// Without CDNURL only Discord's CDN is allowed: the fake's URL is foreign.
	strict, err := discord.NewClient(discord.ClientConfig{Token: discordtest.Token, APIURL: fake.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	discord.SetDownloadTransport(strict, tr)
	if _, err := strict.Download(t.Context(), att["url"].(string), 1<<20); err == nil {
		t.Errorf("Download of the fake's URL without CDNURL = nil error, want a refusal")
	}
	if reqs := tr.requests(); len(reqs) != 0 {
		t.Errorf("requests sent = %d, want none", len(reqs))
	}
	if _, err := discord.NewClient(discord.ClientConfig{Token: "t", CDNURL: "cdn.example"}); err == nil {
		t.Errorf("NewClient with CDNURL cdn.example = nil error, want one")
	}
}

func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPostFile(t *testing.T) {
	t.Parallel()
	fake, c := newFileClient(t, nil)
	img := tinyPNG(t)
	const thread = "1400000000000000001"

	id, err := c.PostFile(t.Context(), thread, "chart.png", img, "Revenue by day, @everyone")
	if err != nil {
		t.Fatalf("PostFile: %v", err)
	}
	msgs := fake.Messages(thread)
	if len(msgs) != 1 {
		t.Fatalf("messages = %+v, want 1", msgs)
	}
	m := msgs[0]
	if m.ID != id || m.Content != "Revenue by day, @everyone" || len(m.Files) != 1 {
		t.Fatalf("message = %+v, want id %s with the content and one file", m, id)
	}
	if f := m.Files[0]; f.Name != "chart.png" || f.ContentType != "image/png" || !bytes.Equal(f.Data, img) {
		t.Errorf("file = {%q %q %d bytes}, want chart.png, image/png, the %d bytes", f.Name, f.ContentType, len(f.Data), len(img))
	}
	calls := fake.Calls()
	body := calls[len(calls)-1].Body
	atts, _ := body["attachments"].([]any)
	if len(atts) != 1 || atts[0].(map[string]any)["id"] != float64(0) || atts[0].(map[string]any)["filename"] != "chart.png" {
		t.Errorf("payload_json attachments = %v, want [{id:0, filename:chart.png}]", body["attachments"])
	}
	if am, _ := body["allowed_mentions"].(map[string]any); am == nil || len(am["parse"].([]any)) != 0 {
		t.Errorf("payload_json allowed_mentions = %v, want {parse: []}", body["allowed_mentions"])
	}
}

func TestPostFileFailures(t *testing.T) {
	t.Parallel()
	t.Run("too large", func(t *testing.T) {
		t.Parallel()
		fake, c := newFileClient(t, nil)
		_, err := c.PostFile(t.Context(), "1400000000000000002", "dump.bin", make([]byte, 10<<20+1), "")
		if err == nil || errors.Is(err, discord.ErrMaybePosted) || !strings.Contains(err.Error(), "40005") {
			t.Errorf("err = %v, want Discord's 413 refusal, not maybe-posted", err)
		}
		if n := len(fake.Messages("1400000000000000002")); n != 0 {
			t.Errorf("messages = %d, want 0", n)
		}
	})
	t.Run("answer lost", func(t *testing.T) {
		t.Parallel()
		fake, c := newFileClient(t, nil)
		discord.WrapAPITransport(c, func(next http.RoundTripper) http.RoundTripper { return loseAnswers{next} })
		_, err := c.PostFile(t.Context(), "1400000000000000003", "a.txt", []byte("a"), "")
		if !errors.Is(err, discord.ErrMaybePosted) {
			t.Errorf("err = %v, want ErrMaybePosted", err)
		}
		if n := len(fake.Messages("1400000000000000003")); n != 1 {
			t.Errorf("messages = %d, want 1 (posted, the answer lost)", n)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		t.Parallel()
		fake, c := newFileClient(t, nil)
		if _, err := c.PostFile(t.Context(), "1400000000000000004", "a.txt", nil, ""); err == nil {
			t.Errorf("PostFile of an empty file = nil error, want one")
		}
		if n := len(fake.Calls()); n != 0 {
			t.Errorf("calls = %d, want 0", n)
		}
	})
}

// loseAnswers sends each request, then fails as if the connection dropped
// before the answer arrived.
type loseAnswers struct{ next http.RoundTripper }

func (l loseAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return nil, errors.New("connection reset by peer")
}
