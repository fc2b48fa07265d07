package telegram_test

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/telegram"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

// countingTransport records the requests a client sends and how many body
// bytes it reads; with hideLength it drops Content-Length from answers, as
// a chunked answer would, and with lose it sends the request but returns
// an error instead of the answer, as a connection lost after sending.
type countingTransport struct {
	hideLength bool
	lose       string // path suffix whose answer is lost

	mu    sync.Mutex
	paths []string
	read  int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.paths = append(t.paths, req.URL.Path)
	t.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if t.lose != "" && strings.HasSuffix(req.URL.Path, t.lose) {
		resp.Body.Close()
		return nil, errors.New("connection reset by peer")
	}
	if t.hideLength {
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

func (t *countingTransport) downloads() (n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.paths {
		if strings.HasPrefix(p, "/file/") {
			n++
		}
	}
	return n
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

func newCountingClient(t *testing.T, apiURL string, tr *countingTransport) *telegram.Client {
	t.Helper()
	c, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: apiURL, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDownload(t *testing.T) {
	t.Parallel()
	small := []byte("%PDF-1.7 minutes")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	const limit = 1 << 10
	for _, tc := range []struct {
		name          string
		data          []byte
		max           int64
		refuseGetFile bool
		wantErr       string
		wantDownloads int
	}{
		{name: "small", data: small, max: limit, wantDownloads: 1},
		{name: "exactly the limit", data: big[:limit], max: limit, wantDownloads: 1},
		{name: "file_size over the limit", data: big, max: limit, wantErr: "1024 bytes", wantDownloads: 0},
		{name: "getFile refused", data: small, max: limit, refuseGetFile: true, wantErr: "Bad Request: file is too big", wantDownloads: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := telegramtest.New(token)
			t.Cleanup(fake.Close)
			tr := &countingTransport{}
			c := newCountingClient(t, fake.URL, tr)
			id := fake.AddFile(tc.data)
			if tc.refuseGetFile {
				fake.Refuse("getFile", 1, telegramtest.Refusal{Code: http.StatusBadRequest, Description: "Bad Request: file is too big"})
			}

			got, err := c.Download(t.Context(), id, tc.max)
			if n := tr.downloads(); n != tc.wantDownloads {
				t.Errorf("file downloads = %d, want %d", n, tc.wantDownloads)
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
			if strings.Contains(err.Error(), token) {
				t.Errorf("err = %q holds the bot token", err)
			}
			if len(tc.data) > limit && !errors.Is(err, chat.ErrFileTooLarge) {
				t.Errorf("err = %v, want ErrFileTooLarge", err)
			}
		})
	}
}

// A getFile answer without file_size (it is optional) or with a file_path
// that is not a plain relative path: the body limit holds, and no request
// leaves the file URL.
func TestDownloadUntrustedAnswers(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("x"), 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bot" + token + "/getFile":
			_ = r.ParseMultipartForm(1 << 10)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"ok":true,"result":{"file_id":"x","file_unique_id":"y","file_path":%q}}`, r.FormValue("file_id"))
		case "/file/bot" + token + "/documents/big.bin":
			_, _ = w.Write(big)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		path          string // the file_path getFile answers
		wantDownloads int
	}{
		{"documents/big.bin", 1},
		{"../bot" + token + "/getMe", 0},
		{"/etc/passwd", 0},
		{"https://evil.example/x", 0},
		{"documents/a?b", 0},
		{"", 0},
	} {
		tr := &countingTransport{hideLength: true}
		c := newCountingClient(t, srv.URL, tr)
		_, err := c.Download(t.Context(), tc.path, 1<<10)
		if err == nil {
			t.Errorf("Download of file_path %q = nil error, want a refusal", tc.path)
			continue
		}
		if strings.Contains(err.Error(), token) {
			t.Errorf("err = %q holds the bot token", err)
		}
		if n := tr.downloads(); n != tc.wantDownloads {
			t.Errorf("file_path %q: downloads = %d, want %d", tc.path, n, tc.wantDownloads)
		}
		if tc.wantDownloads > 0 {
			if !errors.Is(err, chat.ErrFileTooLarge) {
				t.Errorf("err = %v, want ErrFileTooLarge", err)
			}
			// getFile's answer is small; the file's body is read at most to the limit + 1.
			if n := tr.bytesRead(); n > 2<<10 {
				t.Errorf("read %d bytes, want the refused file read no further than its limit", n)
			}
		}
	}
}

func TestDownloadErrorsHideToken(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // every call fails to connect
	c, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: url})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Download(t.Context(), "BQACAgIAAxkBAAIB", 1<<10); err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("Download err = %v, want an error without the token", err)
	}
}

// A Bot API (or proxy) answering with a redirect does not get the token
// sent on: every URL holds it, and Go puts the last URL in the Referer of
// the request it follows with.
func TestRedirectsDoNotCarryTheToken(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.String()+" referer="+r.Referer())
		mu.Unlock()
		_, _ = io.WriteString(w, `{"ok":true,"result":{"message_id":7,"date":0,"chat":{"id":1,"type":"private"}}}`)
	}))
	defer elsewhere.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/landing", http.StatusFound)
	}))
	defer api.Close()
	c, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: api.URL, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(t.Context(), 1, 0, "hi", nil); err == nil {
		t.Errorf("Send through a redirect: no error, want the redirect refused")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Errorf("the redirect's target was asked %q", seen)
	}
}

// tinyPNG is a 2×1 PNG image.
var tinyPNG = func() []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 1))); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

func TestSendFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, mime, caption string
		data                      []byte
		thread                    int
		wantKind, wantCaption     string
	}{
		{name: "photo in a topic", file: "chart.png", mime: "image/png", data: tinyPNG, thread: 7, caption: "Revenue is *up* 5.2%!",
			wantKind: "photo", wantCaption: telegram.Markdown("Revenue is *up* 5.2%!")},
		{name: "document", file: "report.pdf", mime: "application/pdf", data: []byte("%PDF-1.7"), caption: "The report (v2).",
			wantKind: "document", wantCaption: telegram.Markdown("The report (v2).")},
		{name: "gif as document", file: "spin.gif", mime: "image/gif", data: []byte("GIF89a\x01\x00\x01\x00"), wantKind: "document"},
		{name: "no caption", file: "notes.txt", mime: "text/plain; charset=utf-8", data: []byte("a\nb\n"), wantKind: "document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake, c := newClient(t)
			id, err := c.SendFile(t.Context(), groupID, tc.thread, tc.file, tc.mime, tc.data, tc.caption)
			if err != nil {
				t.Fatalf("SendFile: %v", err)
			}
			msgs := fake.Messages()
			if len(msgs) != 1 {
				t.Fatalf("messages = %+v, want 1", msgs)
			}
			m := msgs[0]
			if m.ID != id || m.ChatID != groupID || m.ThreadID != tc.thread || m.Kind != tc.wantKind || m.FileName != tc.file || !bytes.Equal(m.File, tc.data) {
				t.Errorf("message = {ID:%d Chat:%d Thread:%d Kind:%q FileName:%q %d bytes}, want {%d %d %d %q %q %d bytes}",
					m.ID, m.ChatID, m.ThreadID, m.Kind, m.FileName, len(m.File), id, groupID, tc.thread, tc.wantKind, tc.file, len(tc.data))
			}
			if m.Caption != tc.wantCaption || (tc.wantCaption != "") != (m.ParseMode == "MarkdownV2") {
				t.Errorf("caption = %q (%s), want %q", m.Caption, m.ParseMode, tc.wantCaption)
			}
		})
	}
}

func TestSendFileFailures(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		fake, c := newClient(t)
		fake.Refuse("sendDocument", 1, telegramtest.Refusal{Code: http.StatusForbidden, Description: "Forbidden: bot was kicked from the group chat"})
		_, err := c.SendFile(t.Context(), groupID, 0, "a.txt", "text/plain", []byte("a"), "")
		if err == nil || errors.Is(err, telegram.ErrMaybePosted) || !strings.Contains(err.Error(), "kicked") {
			t.Errorf("err = %v, want Telegram's refusal, not maybe-posted", err)
		}
		if n := len(fake.Messages()); n != 0 {
			t.Errorf("messages = %d, want 0", n)
		}
	})
	t.Run("not an image", func(t *testing.T) {
		t.Parallel()
		// sendPhoto refuses it (IMAGE_PROCESS_FAILED); it goes as a document.
		fake, c := newClient(t)
		_, err := c.SendFile(t.Context(), groupID, 0, "x.png", "image/png", []byte("not a png"), "")
		if msgs := fake.Messages(); err != nil || len(msgs) != 1 || msgs[0].Kind != "document" || fake.Calls("sendPhoto") != 1 {
			t.Errorf("err = %v, messages %+v; want the refused photo sent as a document", err, msgs)
		}
	})
	t.Run("answer lost", func(t *testing.T) {
		t.Parallel()
		fake := telegramtest.New(token)
		t.Cleanup(fake.Close)
		c := newCountingClient(t, fake.URL, &countingTransport{lose: "/sendPhoto"})
		_, err := c.SendFile(t.Context(), groupID, 0, "chart.png", "image/png", tinyPNG, "")
		if !errors.Is(err, telegram.ErrMaybePosted) {
			t.Errorf("err = %v, want ErrMaybePosted", err)
		}
		if strings.Contains(fmt.Sprint(err), token) {
			t.Errorf("err = %q holds the bot token", err)
		}
		if n := fake.Calls("sendPhoto"); n != 1 {
			t.Errorf("sendPhoto calls = %d, want 1 (no retry)", n)
		}
		if n := len(fake.Messages()); n != 1 {
			t.Errorf("messages = %d, want 1 (posted, the answer lost)", n)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		t.Parallel()
		fake, c := newClient(t)
		if _, err := c.SendFile(t.Context(), groupID, 0, "a.txt", "text/plain", nil, ""); err == nil {
			t.Errorf("SendFile of an empty file = nil error, want one")
		}
		if n := fake.Calls("sendDocument"); n != 0 {
			t.Errorf("sendDocument calls = %d, want 0", n)
		}
	})
}
