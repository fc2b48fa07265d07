package slack

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"
	"golang.org/x/time/rate"

	"github.com/agentgate/agentgate/interfaces/chat"
)

// DefaultAPIURL is the Slack Web API base used when ClientConfig.APIURL is empty.
const DefaultAPIURL = "https://slack.com/api/"

// ErrMaybePosted marks a failed call that may still have taken effect at Slack: the request
// was sent and no definite answer came back (timeout, connection lost, 5xx, unreadable
// answer). The client never retries such a call when repeating it could post twice; the
// outbox reconciles instead (look the message up before posting again). Use errors.Is, or
// errors.As with *MaybePostedError for the details.
var ErrMaybePosted = errors.New("slack: the message may have been posted")

// ErrAuth is matched (errors.Is) by an *APIError whose code says the bot token is wrong,
// missing or revoked.
var ErrAuth = errors.New("slack: bot token rejected")

// MaybePostedError is a call that may or may not have taken effect. It matches ErrMaybePosted.
type MaybePostedError struct {
	Method  string // Web API method, e.g. "chat.postMessage"
	Channel string
	TS      string // the message edited or appended to; "" for a new message
	Err     error  // what went wrong: a transport error, a context error, slackapi.StatusCodeError
}

func (e *MaybePostedError) Error() string {
	return fmt.Sprintf("slack %s in %s: outcome unknown, the message may have been posted: %v", e.Method, e.Channel, e.Err)
}

func (e *MaybePostedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMaybePosted.
func (e *MaybePostedError) Is(target error) bool { return target == ErrMaybePosted }

// APIError is a definite refusal from Slack ({"ok":false,"error":code} or a 4xx status):
// nothing was posted or changed.
type APIError struct {
	Method string
	Code   string // Slack's error code, e.g. "channel_not_found"; "http_<status>" for a 4xx status
	Needed string // scope Slack says is missing, for missing_scope
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("slack %s: %s", e.Method, e.Code)
	switch {
	case slices.Contains(authCodes, e.Code):
		msg += ": check SLACK_BOT_TOKEN, it must be the bot token (xoxb-…) of the installed app"
	case e.Code == "channel_not_found", e.Code == "not_in_channel":
		msg += ": invite the app to the channel (/invite @agentgate)"
	case e.Code == "missing_scope":
		msg += ": add the scope " + e.Needed + " to the app and reinstall it"
	}
	return msg
}

// authCodes are Slack's error codes of a wrong, missing or revoked token.
var authCodes = []string{"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}

// Is reports whether target is ErrAuth and the code is an authentication failure.
func (e *APIError) Is(target error) bool {
	return target == ErrAuth && slices.Contains(authCodes, e.Code)
}

// ClientConfig configures a Client. The zero value of each field is its default.
type ClientConfig struct {
	// Token is the bot token (xoxb-…), from SLACK_BOT_TOKEN. Required.
	Token string
	// APIURL is the Web API base, from SLACK_API_URL; "https://host" and
	// "https://host/api/" both work. Default DefaultAPIURL.
	APIURL string
	// HTTPClient sends the requests. Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// ChannelInterval is the minimum spacing of message posts, edits and stream calls in one
	// channel (Slack allows about one message per second per channel). Default 1 s;
	// negative turns the limit off.
	ChannelInterval time.Duration
	// ChannelBurst is how many such calls may go out back to back before the spacing
	// applies. Default 1.
	ChannelBurst int
	// RateLimitRetries is how many 429 answers one call waits out (honouring Retry-After)
	// before giving up. Default 10.
	RateLimitRetries int
	// UpdateRetries is how many times an idempotent call (chat.update, auth.test) is repeated
	// after a 5xx or transport error, with backoff starting at one second. Default 2.
	UpdateRetries int
	// Logger receives rate-limit and retry notices. Default: discard.
	Logger *slog.Logger
}

func (c ClientConfig) validate() error {
	if c.Token == "" {
		return errors.New("slack: bot token is empty: set SLACK_BOT_TOKEN to the app's xoxb-… token")
	}
	if c.APIURL != "" {
		u, err := url.Parse(c.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("slack: SLACK_API_URL %q: must be an absolute http(s) URL", c.APIURL)
		}
	}
	if c.ChannelBurst < 0 || c.RateLimitRetries < 0 || c.UpdateRetries < 0 {
		return errors.New("slack: client burst and retry counts must not be negative")
	}
	return nil
}

// Client calls the Slack Web API for the adapter: posts, edits, ephemeral replies and
// streamed messages, each channel rate limited, 429s waited out, and no blind retry of a call
// that might have posted.
type Client struct {
	api    *slackapi.Client
	cfg    ClientConfig
	log    *slog.Logger
	pace   *chat.Pacer // per channel; tests replace its clock
	apiURL string
	hc     *http.Client // cfg.HTTPClient or the default; file downloads use it directly
}

// NewClient returns a Client for cfg.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, log: cfg.Logger}
	chat.Defaults(nil, &c.log)
	c.apiURL = apiBase(cfg.APIURL)
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	c.hc = hc
	limit, burst := rate.Every(cmp.Or(cfg.ChannelInterval, time.Second)), cmp.Or(cfg.ChannelBurst, 1)
	if cfg.ChannelInterval < 0 {
		limit = rate.Inf
	}
	c.pace = &chat.Pacer{Platform: "slack", Logger: c.log, Retries: cmp.Or(cfg.RateLimitRetries, 10), RetryAfter: retryAfter,
		Limits: func(string) []*rate.Limiter { return []*rate.Limiter{rate.NewLimiter(limit, burst)} }}
	if c.cfg.UpdateRetries == 0 {
		c.cfg.UpdateRetries = 2
	}
	c.api = slackapi.New(cfg.Token, slackapi.OptionAPIURL(c.apiURL), slackapi.OptionHTTPClient(bearerClient{hc}))
	return c, nil
}

// apiBase turns SLACK_API_URL into slack-go's endpoint prefix, ending in "/api/".
func apiBase(u string) string {
	if u == "" {
		return DefaultAPIURL
	}
	u = strings.TrimRight(u, "/")
	if !strings.HasSuffix(u, "/api") {
		u += "/api"
	}
	return u + "/"
}

// AuthTest checks the token and returns who the bot is (its user id lets the adapter ignore
// its own messages).
func (c *Client) AuthTest(ctx context.Context) (*slackapi.AuthTestResponse, error) {
	var resp *slackapi.AuthTestResponse
	err := c.call(ctx, "auth.test", "", "", false, true, func(ctx context.Context) error {
		var err error
		resp, err = c.api.AuthTestContext(ctx)
		return err
	})
	return resp, err
}

// Post posts a message in channel, in the thread threadTS unless it is empty, and returns
// its ts. text is the mrkdwn text (the notification fallback when blocks are given).
// A 429 is waited out and retried; any failure that may have posted returns an error
// matching ErrMaybePosted and is not retried.
func (c *Client) Post(ctx context.Context, channel, threadTS, text string, blocks []slackapi.Block) (string, error) {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
	if threadTS != "" {
		opts = append(opts, slackapi.MsgOptionTS(threadTS))
	}
	if len(blocks) > 0 {
		opts = append(opts, slackapi.MsgOptionBlocks(blocks...))
	}
	var ts string
	err := c.call(ctx, "chat.postMessage", channel, "", true, false, func(ctx context.Context) error {
		var err error
		_, ts, err = c.api.PostMessageContext(ctx, channel, opts...)
		return err
	})
	if err == nil && ts == "" {
		return "", &MaybePostedError{Method: "chat.postMessage", Channel: channel, Err: errors.New("answer carried no ts")}
	}
	return ts, err
}

// Update replaces the text, and the blocks when blocks is not nil, of message ts in channel.
// Nil blocks keep the message's blocks; to remove buttons pass the blocks that replace them.
// An update is idempotent, so 5xx and transport failures are retried too.
func (c *Client) Update(ctx context.Context, channel, ts, text string, blocks []slackapi.Block) error {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
	if len(blocks) > 0 {
		opts = append(opts, slackapi.MsgOptionBlocks(blocks...))
	}
	return c.call(ctx, "chat.update", channel, ts, true, true, func(ctx context.Context) error {
		_, _, _, err := c.api.UpdateMessageContext(ctx, channel, ts, opts...)
		return err
	})
}

// StreamTarget says where chat.startStream opens a streamed reply.
type StreamTarget struct {
	Channel  string
	ThreadTS string // the message replied to; Slack wants streams to be thread replies
	// RecipientUserID and RecipientTeamID name the user the answer is for; Slack requires
	// them when streaming in a channel (not a DM).
	RecipientUserID string
	RecipientTeamID string
}

// StartStream opens a streamed message with markdown as its first text and returns its ts.
// It creates a message, so it follows Post's rules: ErrMaybePosted, never a blind retry.
// Slack answers an unsupported workspace or channel with an APIError; fall back to Post
// and Update then.
func (c *Client) StartStream(ctx context.Context, t StreamTarget, markdown string) (string, error) {
	var opts []slackapi.MsgOption
	if t.ThreadTS != "" {
		opts = append(opts, slackapi.MsgOptionTS(t.ThreadTS))
	}
	if t.RecipientUserID != "" {
		opts = append(opts, slackapi.MsgOptionRecipientUserID(t.RecipientUserID))
	}
	if t.RecipientTeamID != "" {
		opts = append(opts, slackapi.MsgOptionRecipientTeamID(t.RecipientTeamID))
	}
	if markdown != "" {
		opts = append(opts, slackapi.MsgOptionMarkdownText(markdown))
	}
	var ts string
	err := c.call(ctx, "chat.startStream", t.Channel, "", true, false, func(ctx context.Context) error {
		var err error
		_, ts, err = c.api.StartStreamContext(ctx, t.Channel, opts...)
		return err
	})
	if err == nil && ts == "" {
		return "", &MaybePostedError{Method: "chat.startStream", Channel: t.Channel, Err: errors.New("answer carried no ts")}
	}
	return ts, err
}

// SetStatus sets the assistant thread status of thread in channel
// (assistant.threads.setStatus), shown under the thread until the app
// replies there; "" clears it. Slack refuses it outside an AI app's
// threads with an APIError.
func (c *Client) SetStatus(ctx context.Context, channel, thread, status string) error {
	return c.call(ctx, "assistant.threads.setStatus", channel, "", false, true, func(ctx context.Context) error {
		return c.api.SetAssistantThreadsStatusContext(ctx, slackapi.AssistantThreadsSetStatusParameters{
			ChannelID: channel, ThreadTS: thread, Status: status})
	})
}

// AppendStream adds markdown to the streamed message ts. Appending is not idempotent: a
// failure that may have appended matches ErrMaybePosted and is not retried (repair with
// Update and the full text if the stream must be abandoned).
func (c *Client) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	return c.call(ctx, "chat.appendStream", channel, ts, true, false, func(ctx context.Context) error {
		_, _, err := c.api.AppendStreamContext(ctx, channel, ts, slackapi.MsgOptionMarkdownText(markdown))
		return err
	})
}

// StopStream ends the streamed message ts, adding markdown (if any) and blocks (if any)
// last. Like AppendStream it is not retried after an uncertain failure.
func (c *Client) StopStream(ctx context.Context, channel, ts, markdown string, blocks []slackapi.Block) error {
	var opts []slackapi.MsgOption
	if markdown != "" {
		opts = append(opts, slackapi.MsgOptionMarkdownText(markdown))
	}
	if len(blocks) > 0 {
		opts = append(opts, slackapi.MsgOptionBlocks(blocks...))
	}
	return c.call(ctx, "chat.stopStream", channel, ts, true, false, func(ctx context.Context) error {
		_, _, err := c.api.StopStreamContext(ctx, channel, ts, opts...)
		return err
	})
}

// call runs do under the rules of the client: the channel's pace when limited, 429s waited
// out (chat.Pacer), uncertain failures retried only when idempotent and reported as
// MaybePostedError otherwise, refusals as *APIError.
func (c *Client) call(ctx context.Context, method, channel, ts string, limited, idempotent bool, do func(context.Context) error) error {
	key := ""
	if limited {
		key = channel
	}
	for failures := 0; ; failures++ {
		err := c.pace.Call(ctx, key, do)
		if err == nil {
			return nil
		}
		if errors.Is(err, chat.ErrNotSent) {
			return fmt.Errorf("slack %s in %s: %w", method, channel, err)
		}
		if apiErr := refusal(method, err); apiErr != nil {
			return apiErr
		}
		// The request may have reached Slack and we do not know what happened.
		if ctx.Err() == nil && idempotent && failures < c.cfg.UpdateRetries {
			c.log.Warn("slack call failed, retrying", "method", method, "channel", channel, "attempt", failures+1, "error", err)
			if err := c.pace.Delay(ctx, time.Second<<failures); err != nil {
				return fmt.Errorf("slack %s in %s: %w", method, channel, err)
			}
			continue
		}
		if idempotent {
			return fmt.Errorf("slack %s in %s: %w", method, channel, err)
		}
		return &MaybePostedError{Method: method, Channel: channel, TS: ts, Err: err}
	}
}

// retryAfter reports whether err is a 429 and how long Slack asked to wait.
func retryAfter(err error) (time.Duration, bool) {
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		return max(rl.RetryAfter, time.Second), true
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) && sc.Code == http.StatusTooManyRequests { // 429 without Retry-After
		return time.Second, true
	}
	return 0, false
}

// refusal returns the *APIError for an answer that says the call did nothing, nil otherwise.
func refusal(method string, err error) *APIError {
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		return &APIError{Method: method, Code: se.Err, Needed: se.Needed}
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) && sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusRequestTimeout {
		return &APIError{Method: method, Code: fmt.Sprintf("http_%d", sc.Code)}
	}
	return nil
}

// bearerClient moves slack-go's form "token" argument into an Authorization: Bearer header,
// as Slack recommends, so the token is not part of any request body.
type bearerClient struct{ hc *http.Client }

func (b bearerClient) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Content-Type") == "application/x-www-form-urlencoded" && req.Body != nil && req.Header.Get("Authorization") == "" {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		if vals, err := url.ParseQuery(string(body)); err == nil && vals.Get("token") != "" {
			req.Header.Set("Authorization", "Bearer "+vals.Get("token"))
			vals.Del("token")
			body = []byte(vals.Encode())
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return b.hc.Do(req)
}
