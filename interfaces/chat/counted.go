package chat

import "net/http"

// APIObserver counts a platform's API calls by outcome (core/metrics
// implements it).
type APIObserver interface {
	PlatformCall(platform, outcome string)
}

// The outcomes of a platform API call, by HTTP status.
const (
	CallOK          = "ok"           // 1xx–3xx
	CallRateLimited = "rate_limited" // 429
	CallRefused     = "client_error" // other 4xx
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
	}
	c.o.PlatformCall(c.platform, outcome)
	return resp, err
}
