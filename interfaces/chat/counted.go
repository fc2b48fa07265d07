package chat

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"net/http"
)

// APIObserver counts a platform's API calls by outcome (core/metrics
// implements it).
type APIObserver interface {
	PlatformCall(platform, outcome string)
}

// The outcomes of a platform API call, by HTTP status.
const (
	CallOK          = "ok"           // 1xx–3xx
	CallRateLimited = "rate_limited" // 429
	CallRefused     = "client_error" // other 4xx, and a JSON answer {"ok":false,…} (Slack's errors come with 200)
	CallFailed      = "server_error" // 5xx
	CallUnreachable = "unreachable"  // no answer: connection, timeout, TLS
)

// Counted is next (http.DefaultTransport when nil) telling o the outcome of
// every request to platform's API.
func Counted(platform string, next http.RoundTripper, o APIObserver) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if o == nil {
		return next
	}
	return counted{platform: platform, next: next, o: o}
}

type counted struct {
	platform string
	next     http.RoundTripper
	o        APIObserver
}

func (c counted) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	outcome := CallOK
	switch {
	case err != nil:
		outcome = CallUnreachable
	case resp.StatusCode == http.StatusTooManyRequests:
		outcome = CallRateLimited
	case resp.StatusCode >= 500:
		outcome = CallFailed
	case resp.StatusCode >= 400:
		outcome = CallRefused
	case refusedOK(resp):
		outcome = CallRefused
	}
	c.o.PlatformCall(c.platform, outcome)
	return resp, err
}

// refusedOK reports whether a successful JSON answer says {"ok":false}, as
// Slack answers the calls it refuses (invalid_auth, channel_not_found …).
// It peeks at the body's first bytes and leaves the body whole.
func refusedOK(resp *http.Response) bool {
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" || resp.Body == nil {
		return false
	}
	br := bufio.NewReaderSize(resp.Body, 64)
	head, _ := br.Peek(32)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
	compact := bytes.Join(bytes.Fields(head), nil)
	return bytes.HasPrefix(compact, []byte(`{"ok":false`))
}
