package slack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// FilesHost is the host that serves the files of a workspace (url_private_download) and
// receives uploads (upload_url). Download and Upload send the bot token only there (and,
// with SLACK_API_URL set elsewhere, to that host outside its API path).
const FilesHost = "files.slack.com"

// Download fetches a shared file from its url_private_download (or url_private) with the
// bot token and returns its bytes. It refuses, before any request, a URL that may not
// receive the token (see mayReceiveToken: a forged event must not get it sent elsewhere),
// and refuses a file larger than max bytes (chat.ErrFileTooLarge) without reading more
// than max+1 bytes of it. A redirect is refused too: files.slack.com redirects to the
// sign-in page when the token cannot read the file. A 4xx answer is an *APIError
// ("http_404"); 429s are waited out and 5xx retried, as for any idempotent call.
func (c *Client) Download(ctx context.Context, fileURL string, max int64) ([]byte, error) {
	if max <= 0 {
		return nil, fmt.Errorf("slack file download: limit %d: must be positive", max)
	}
	if err := c.mayReceiveToken(fileURL); err != nil {
		return nil, fmt.Errorf("slack file download: %w", err)
	}
	// No redirects: the token must not follow one, and a file the token can read is served
	// in place.
	hc := *c.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var data []byte
	var final error // an answer the retry rules must not repeat
	err := c.call(ctx, "file download", "", "", false, true, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fileURL, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			final = fmt.Errorf("slack file download: redirected to %s: the bot cannot read this file (is the app in the channel, with the files:read scope?)", hostOf(resp.Header.Get("Location")))
			return nil
		case resp.StatusCode != http.StatusOK:
			return statusError(resp)
		}
		data, err = chat.ReadFile(resp, max)
		if errors.Is(err, chat.ErrFileTooLarge) {
			final = fmt.Errorf("slack file download: %w", err)
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if final != nil {
		return nil, final
	}
	return data, nil
}

// statusError turns a non-200 answer into the errors slack-go returns, so call's rules
// apply: a 429 is waited out, another 4xx is a refusal, a 5xx retried.
func statusError(resp *http.Response) error {
	if resp.StatusCode == http.StatusTooManyRequests {
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			return &slackapi.RateLimitedError{RetryAfter: time.Duration(secs) * time.Second}
		}
	}
	return slackapi.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}
}

// mayReceiveToken returns an error unless raw is an https URL on FilesHost, or, when
// SLACK_API_URL points away from Slack (a fake in tests, a proxy), a URL on the API host
// (scheme and host as configured) outside the API base path. Slack's own API host never
// receives the token this way, and no Web API method ever does: a file URL naming
// https://slack.com/api/conversations.history would have the bot read a channel and hand
// the answer to the model as an attachment.
func (c *Client) mayReceiveToken(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("file URL %q: must be an absolute URL", raw)
	}
	if u.User != nil {
		return fmt.Errorf("file URL on %s: must not carry credentials", u.Host)
	}
	if u.Scheme == "https" && strings.EqualFold(u.Host, FilesHost) {
		return nil
	}
	refused := fmt.Errorf("refusing to send the bot token to %s://%s: files must come from https://%s", u.Scheme, u.Host, FilesHost)
	api, err := url.Parse(c.apiURL)
	if err != nil || slackHost(api.Hostname()) || u.Scheme != api.Scheme || !strings.EqualFold(u.Host, api.Host) {
		return refused
	}
	if underPath(u.Path, api.Path) {
		return fmt.Errorf("refusing to send the bot token to %s://%s%s: a Web API method is not a file", u.Scheme, u.Host, u.Path)
	}
	return nil
}

// slackHost reports whether host is Slack's (slack.com or a subdomain): the Web API there
// takes the token only through slack-go's calls, never as a file URL.
func slackHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "slack.com" || strings.HasSuffix(host, ".slack.com")
}

// underPath reports whether the URL path p is base (an API base path ending in "/") or
// under it, after resolving dot segments and repeated slashes and ignoring case, as a
// lenient server might.
func underPath(p, base string) bool {
	base = strings.ToLower(strings.TrimRight(base, "/"))
	if base == "" {
		return true
	}
	p = strings.ToLower(path.Clean("/" + p))
	return p == base || strings.HasPrefix(p, base+"/")
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "another page"
}

// Upload shares data as a file named name (title shown above it; name when empty) in
// channel, in the thread thread unless it is empty, with the files.uploadV2 flow:
// files.getUploadURLExternal, the bytes POSTed to the upload URL, then
// files.completeUploadExternal. The first two post nothing and are retried like idempotent
// calls; the last shares the file, so it follows Post's rules: it waits for the channel
// limiter and a failure that may have shared the file matches ErrMaybePosted and is not
// retried. Refusals are *APIError.
func (c *Client) Upload(ctx context.Context, channel, thread, name, title string, data []byte) error {
	if name == "" {
		return errors.New("slack file upload: the file name is empty")
	}
	if len(data) == 0 {
		return fmt.Errorf("slack file upload %s: the file is empty (Slack refuses empty uploads)", name)
	}
	if title == "" {
		title = name
	}
	var up *slackapi.GetUploadURLExternalResponse
	err := c.call(ctx, "files.getUploadURLExternal", channel, "", false, true, func(ctx context.Context) error {
		var err error
		up, err = c.api.GetUploadURLExternalContext(ctx, slackapi.GetUploadURLExternalParameters{FileName: name, FileSize: len(data)})
		return err
	})
	if err != nil {
		return err
	}
	if up.UploadURL == "" || up.FileID == "" {
		return fmt.Errorf("slack files.getUploadURLExternal: answer carried no upload_url or file_id")
	}
	if err := c.mayReceiveToken(up.UploadURL); err != nil {
		return fmt.Errorf("slack file upload: %w", err)
	}
	err = c.call(ctx, "file upload", channel, "", false, true, func(ctx context.Context) error {
		return c.api.UploadToURL(ctx, slackapi.UploadToURLParameters{UploadURL: up.UploadURL, Reader: bytes.NewReader(data), Filename: name})
	})
	if err != nil {
		return err
	}
	return c.call(ctx, "files.completeUploadExternal", channel, "", true, false, func(ctx context.Context) error {
		_, err := c.api.CompleteUploadExternalContext(ctx, slackapi.CompleteUploadExternalParameters{
			Files:           []slackapi.FileSummary{{ID: up.FileID, Title: title}},
			Channel:         channel,
			ThreadTimestamp: thread,
		})
		return err
	})
}
