package discord

import "net/http"

// SetDownloadTransport makes c's Download send its requests through rt.
func SetDownloadTransport(c *Client, rt http.RoundTripper) { c.dl.Transport = rt }

// WrapAPITransport makes c's REST calls go through wrap(the transport they use).
func WrapAPITransport(c *Client, wrap func(http.RoundTripper) http.RoundTripper) {
	c.s.Client.Transport = wrap(c.s.Client.Transport)
}
