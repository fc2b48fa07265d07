package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// DefaultCDNURL is where Discord serves attachments (an attachment's url);
// its proxy_url is on media.discordapp.net.
const DefaultCDNURL = "https://cdn.discordapp.com"

// mediaURL serves attachments' proxy_url.
const mediaURL = "https://media.discordapp.net"

// cdnBases parses ClientConfig.CDNURL and returns the bases Download
// accepts: Discord's CDN and media proxy, and CDNURL.
func cdnBases(extra string) ([]*url.URL, error) {
	var out []*url.URL
	for _, raw := range []string{DefaultCDNURL, mediaURL} {
		u, _ := url.Parse(raw)
		out = append(out, u)
	}
	if extra == "" || strings.TrimRight(extra, "/") == DefaultCDNURL {
		return out, nil
	}
	u, err := url.Parse(extra)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("discord: CDN URL %q: must be an absolute http(s) URL like %s", extra, DefaultCDNURL)
	}
	return append(out, u), nil
}

// allowed returns an error unless u is on one of the CDN bases (same
// scheme and host).
func (c *Client) allowed(u *url.URL) error {
	if u.User == nil {
		for _, b := range c.cdn {
			if u.Scheme == b.Scheme && strings.EqualFold(u.Host, b.Host) {
				return nil
			}
		}
	}
	return fmt.Errorf("refusing to fetch %s://%s: attachments come from %s or %s", u.Scheme, u.Host, DefaultCDNURL, mediaURL)
}

// checkRedirect follows a redirect only to the CDN bases.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("too many redirects")
	}
	return c.allowed(req.URL)
}

// Download fetches an attachment from its url (or proxy_url): a signed CDN
// URL, so no Authorization header goes with it. Only URLs on
// cdn.discordapp.com, media.discordapp.net (https) or ClientConfig.CDNURL
// are fetched; any other is refused before a request. A file larger than
// max bytes is refused (chat.ErrFileTooLarge) without reading more than max+1
// bytes of it.
func (c *Client) Download(ctx context.Context, rawURL string, max int64) ([]byte, error) {
	if max <= 0 {
		return nil, fmt.Errorf("discord attachment download: limit %d: must be positive", max)
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("discord attachment download: %q: must be an absolute URL", rawURL)
	}
	if err := c.allowed(u); err != nil {
		return nil, fmt.Errorf("discord attachment download: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("discord attachment download: %w", err)
	}
	req.Header.Set("User-Agent", c.s.UserAgent)
	resp, err := c.dl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("discord attachment download: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("discord attachment download: HTTP %d: the link expired or the file is gone; use the url of a fresh MESSAGE_CREATE", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("discord attachment download: HTTP %d", resp.StatusCode)
	}
	data, err := chat.ReadFile(resp, max)
	if err != nil {
		return nil, fmt.Errorf("discord attachment download: %w", err)
	}
	return data, nil
}

// filePayload is the payload_json of a message with uploaded files.
type filePayload struct {
	Content         string                            `json:"content,omitempty"`
	Attachments     []fileRef                         `json:"attachments"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
}

// fileRef names the upload files[ID] of a new message.
type fileRef struct {
	ID       int    `json:"id"`
	Filename string `json:"filename"`
}

// PostFile posts data as the attachment name in channel (a thread too),
// with content (mentions not pinging anyone) above it, and returns the
// message id: POST /channels/{id}/messages as multipart/form-data, the
// message in payload_json and the file as files[0], through discordgo's
// rate limiter. As with Post, a refusal returns an error and an unknown
// outcome one wrapping ErrMaybePosted.
func (c *Client) PostFile(ctx context.Context, channel, name string, data []byte, content string) (string, error) {
	if name == "" {
		name = "file"
	}
	if len(data) == 0 {
		return "", fmt.Errorf("discord post file %s: the file is empty", name)
	}
	payload := filePayload{Content: content, Attachments: []fileRef{{ID: 0, Filename: name}}, AllowedMentions: noMentions}
	ct, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(name)), ";")
	contentType, body, err := discordgo.MultipartBodyWithJSON(payload, []*discordgo.File{{Name: name, ContentType: ct, Reader: bytes.NewReader(data)}})
	if err != nil {
		return "", fmt.Errorf("discord post file %s: %w", name, err)
	}
	endpoint := discordgo.EndpointChannelMessages(channel)
	resp, err := c.s.RequestWithLockedBucket(http.MethodPost, endpoint, contentType, body, c.s.Ratelimiter.LockBucket(endpoint), 0,
		discordgo.WithContext(ctx))
	if err != nil {
		return "", classify("post file", err)
	}
	var m discordgo.Message
	if err := json.Unmarshal(resp, &m); err != nil || m.ID == "" {
		return "", fmt.Errorf("discord post file: %w: the answer carried no message id", ErrMaybePosted)
	}
	return m.ID, nil
}
