package discord

import (
	"context"
	"net/http"

	"github.com/bwmarrin/discordgo"
)

// SetDownloadTransport makes c's Download send its requests through rt.
func SetDownloadTransport(c *Client, rt http.RoundTripper) { c.dl.Transport = rt }

// WrapAPITransport makes c's REST calls go through wrap(the transport they use).
func WrapAPITransport(c *Client, wrap func(http.RoundTripper) http.RoundTripper) {
	c.s.Client.Transport = wrap(c.s.Client.Transport)
}

// StartNow starts the run of m as the inbox processor would, at once: what
// needs no run is no error.
func (h *Handler) StartNow(ctx context.Context, m *discordgo.Message) error {
	e, ok, err := h.entry(ctx, m)
	if !ok || err != nil {
		return err
	}
	return h.start(ctx, "msg:"+m.ID, e)
}
