package slack

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
)

// fakeClock is the client's clock in tests: Sleep records the wait asked for and moves time
// on at once, so a Retry-After or a limiter delay costs no wall-clock time.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.t = c.t.Add(d)
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

func newTestClient(t *testing.T, fake *slacktest.Server, cfg ClientConfig) (*Client, *fakeClock) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = fake.Token
	}
	cfg.APIURL = fake.URL
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	clock := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	c.pace.Now, c.pace.Sleep = clock.Now, clock.Sleep
	return c, clock
}

func TestClientPostInThread(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, _ := newTestClient(t, fake, ClientConfig{})
	blocks := []slackapi.Block{slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, "*hi*", false, false), nil, nil)}

	ts, err := c.Post(t.Context(), "C1", "1700000000.000001", "hi", blocks)
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	m, ok := fake.Message("C1", ts)
	if !ok {
		t.Fatalf("fake has no message %s; has %+v", ts, fake.Messages(""))
	}
	if m.ThreadTS != "1700000000.000001" || m.Text != "hi" || !strings.Contains(string(m.Blocks), `"*hi*"`) {
		t.Errorf("message = %+v, want thread reply with text and blocks", m)
	}
	calls := fake.Calls("chat.postMessage")
	if len(calls) != 1 || !calls[0].Bearer || calls[0].Args["token"] != "" {
		t.Errorf("calls = %+v, want one call with the token in the Authorization header only", calls)
	}
}

func TestClientUpdate(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, _ := newTestClient(t, fake, ClientConfig{})
	ts, err := c.Post(t.Context(), "C1", "", "thinking…", nil)
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	blocks := []slackapi.Block{slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType, "Approved by <@U1>", false, false))}
	if err := c.Update(t.Context(), "C1", ts, "Approved", blocks); err != nil {
		t.Fatalf("Update: %v", err)
	}
	m, _ := fake.Message("C1", ts)
	if m.Text != "Approved" || !strings.Contains(string(m.Blocks), "Approved by") || m.Edits != 1 {
		t.Errorf("message = %+v, want the updated text and blocks", m)
	}
}

func TestClientWaitsOutRateLimit(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, clock := newTestClient(t, fake, ClientConfig{})
	fake.RateLimit("chat.postMessage", 1, 1)

	ts, err := c.Post(t.Context(), "C1", "", "hello", nil)
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	if n := len(fake.Calls("chat.postMessage")); n != 2 {
		t.Errorf("postMessage calls = %d, want 2 (the 429, then the post)", n)
	}
	if msgs := fake.Messages("C1"); len(msgs) != 1 || msgs[0].TS != ts {
		t.Errorf("messages = %+v, want exactly the one posted", msgs)
	}
	sleeps := clock.Sleeps()
	if len(sleeps) == 0 || sleeps[0] < time.Second {
		t.Errorf("waits = %v, want a first wait of at least Retry-After (1s)", sleeps)
	}
}

func TestClientGivesUpAfterRateLimitRetries(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, _ := newTestClient(t, fake, ClientConfig{RateLimitRetries: 2})
	fake.RateLimit("chat.postMessage", 3, 5)

	_, err := c.Post(t.Context(), "C1", "", "hello", nil)
	var rl *slackapi.RateLimitedError
	if !errors.As(err, &rl) || errors.Is(err, ErrMaybePosted) {
		t.Fatalf("err = %v, want a rate limit error that is not maybe-posted", err)
	}
	if n := len(fake.Calls("chat.postMessage")); n != 3 {
		t.Errorf("postMessage calls = %d, want 3", n)
	}
}

func TestClientPostIsNotRetriedWhenOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault slacktest.Fault
		want  int // messages in the fake afterwards
	}{
		{"500 before posting", slacktest.Fault{Status: http.StatusInternalServerError}, 0},
		{"502 after posting", slacktest.Fault{Status: http.StatusBadGateway, Commit: true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := slacktest.New(t)
			c, clock := newTestClient(t, fake, ClientConfig{})
			fake.Fail("chat.postMessage", tc.fault, 1)

			_, err := c.Post(t.Context(), "C1", "1700000000.000001", "answer", nil)
			if !errors.Is(err, ErrMaybePosted) {
				t.Fatalf("err = %v, want ErrMaybePosted", err)
			}
			var mp *MaybePostedError
			if !errors.As(err, &mp) || mp.Method != "chat.postMessage" || mp.Channel != "C1" {
				t.Errorf("err = %#v, want a *MaybePostedError for chat.postMessage in C1", err)
			}
			var sc slackapi.StatusCodeError
			if !errors.As(err, &sc) || sc.Code != tc.fault.Status {
				t.Errorf("err = %v, want the HTTP status %d kept", err, tc.fault.Status)
			}
			if n := len(fake.Calls("chat.postMessage")); n != 1 {
				t.Errorf("postMessage calls = %d, want 1 (no retry)", n)
			}
			if n := len(fake.Messages("C1")); n != tc.want {
				t.Errorf("messages = %d, want %d", n, tc.want)
			}
			if s := clock.Sleeps(); len(s) != 0 {
				t.Errorf("waits = %v, want none", s)
			}
		})
	}
}

func TestClientUpdateIsRetriedAfterServerError(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, clock := newTestClient(t, fake, ClientConfig{ChannelInterval: -1})
	ts, err := c.Post(t.Context(), "C1", "", "draft", nil)
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	fake.ServerError("chat.update", http.StatusServiceUnavailable, 1)

	if err := c.Update(t.Context(), "C1", ts, "final", nil); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if n := len(fake.Calls("chat.update")); n != 2 {
		t.Errorf("update calls = %d, want 2", n)
	}
	if m, _ := fake.Message("C1", ts); m.Text != "final" {
		t.Errorf("text = %q, want final", m.Text)
	}
	if s := clock.Sleeps(); len(s) != 1 || s[0] <= 0 {
		t.Errorf("waits = %v, want one backoff", s)
	}
}

func TestClientRefusals(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	fake.Channels("C1")

	bad, _ := newTestClient(t, fake, ClientConfig{Token: "xoxb-wrong"})
	_, err := bad.Post(t.Context(), "C1", "", "hi", nil)
	var apiErr *APIError
	if !errors.Is(err, ErrAuth) || !errors.As(err, &apiErr) || apiErr.Code != "invalid_auth" {
		t.Fatalf("err = %v, want an invalid_auth APIError matching ErrAuth", err)
	}
	if errors.Is(err, ErrMaybePosted) || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN") {
		t.Errorf("err = %q, want a definite error that says to check SLACK_BOT_TOKEN", err)
	}
	if _, err := bad.AuthTest(t.Context()); !errors.Is(err, ErrAuth) {
		t.Errorf("AuthTest err = %v, want ErrAuth", err)
	}

	good, _ := newTestClient(t, fake, ClientConfig{})
	_, err = good.Post(t.Context(), "C2", "", "hi", nil)
	if !errors.As(err, &apiErr) || apiErr.Code != "channel_not_found" || errors.Is(err, ErrAuth) {
		t.Errorf("err = %v, want channel_not_found", err)
	}
	if n := len(fake.Calls("chat.postMessage")); n != 2 {
		t.Errorf("postMessage calls = %d, want 2 (none retried)", n)
	}
	if len(fake.Messages("")) != 0 {
		t.Errorf("messages = %+v, want none", fake.Messages(""))
	}
}

func TestClientAuthTest(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, _ := newTestClient(t, fake, ClientConfig{})
	who, err := c.AuthTest(t.Context())
	if err != nil {
		t.Fatalf("AuthTest: %v", err)
	}
	if who.UserID != slacktest.DefaultUserID || who.BotID != slacktest.DefaultBotID {
		t.Errorf("AuthTest = %+v", who)
	}
}

func TestClientChannelLimiter(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, clock := newTestClient(t, fake, ClientConfig{})

	for _, ch := range []string{"C1", "C2", "C3"} {
		if _, err := c.Post(t.Context(), ch, "", "first", nil); err != nil {
			t.Fatalf("Post %s: %v", ch, err)
		}
	}
	if s := clock.Sleeps(); len(s) != 0 {
		t.Fatalf("waits = %v, want none for first posts in different channels", s)
	}
	ts, err := c.Post(t.Context(), "C1", "", "second", nil)
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	if err := c.Update(t.Context(), "C1", ts, "edited", nil); err != nil {
		t.Fatalf("Update: %v", err)
	}
	s := clock.Sleeps()
	if len(s) != 2 || s[0] < 900*time.Millisecond || s[1] < 900*time.Millisecond {
		t.Errorf("waits = %v, want two waits of about 1s in C1", s)
	}
	// An ephemeral reply is not held back by the channel limiter.
	if err := c.PostEphemeral(t.Context(), "C1", "U1", "not allowed"); err != nil {
		t.Fatalf("PostEphemeral: %v", err)
	}
	if got := clock.Sleeps(); len(got) != 2 {
		t.Errorf("waits after ephemeral = %v, want no new wait", got)
	}
	if e := fake.Ephemerals(); len(e) != 1 || e[0].User != "U1" || e[0].Text != "not allowed" {
		t.Errorf("ephemerals = %+v", e)
	}
}

func TestClientChannelLimiterConfigurable(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, clock := newTestClient(t, fake, ClientConfig{ChannelInterval: 3 * time.Second, ChannelBurst: 2})
	for range 3 {
		if _, err := c.Post(t.Context(), "C1", "", "x", nil); err != nil {
			t.Fatal(err)
		}
	}
	if s := clock.Sleeps(); len(s) != 1 || s[0] != 3*time.Second {
		t.Errorf("waits = %v, want a burst of 2 then one 3s wait", s)
	}
}

func TestClientCancelDuringRateLimitWait(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, _ := newTestClient(t, fake, ClientConfig{})
	waiting := make(chan time.Duration, 1)
	c.pace.Sleep = func(ctx context.Context, d time.Duration) error {
		waiting <- d
		return chat.SleepCtx(ctx, d) // a real 30s wait: only cancellation ends it in time
	}
	fake.RateLimit("chat.postMessage", 30, 1)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.Post(ctx, "C1", "", "hello", nil)
		done <- err
	}()
	if d := <-waiting; d < 30*time.Second {
		t.Errorf("wait = %v, want Retry-After 30s", d)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrMaybePosted) {
			t.Errorf("err = %v, want context.Canceled and not maybe-posted (a 429 posted nothing)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Post did not return after its context was cancelled")
	}
	if n := len(fake.Messages("")); n != 0 {
		t.Errorf("messages = %d, want 0", n)
	}
}

func TestClientStream(t *testing.T) {
	t.Parallel()
	fake := slacktest.New(t)
	c, _ := newTestClient(t, fake, ClientConfig{ChannelInterval: -1})
	ctx := t.Context()

	ts, err := c.StartStream(ctx, StreamTarget{Channel: "C1", ThreadTS: "1700000000.000001", RecipientUserID: "U1", RecipientTeamID: "T1"}, "Hel")
	if err != nil {
		t.Fatalf("StartStream: %v", err)
	}
	if err := c.AppendStream(ctx, "C1", ts, "lo, "); err != nil {
		t.Fatalf("AppendStream: %v", err)
	}
	if m, _ := fake.Message("C1", ts); !m.Streaming || m.Text != "Hello, " {
		t.Errorf("while streaming: %+v", m)
	}
	if err := c.StopStream(ctx, "C1", ts, "world", nil); err != nil {
		t.Fatalf("StopStream: %v", err)
	}
	m, _ := fake.Message("C1", ts)
	if m.Streaming || m.Text != "Hello, world" || m.ThreadTS != "1700000000.000001" {
		t.Errorf("after stop: %+v", m)
	}
	start := fake.Calls("chat.startStream")[0]
	if start.Args["recipient_user_id"] != "U1" || start.Args["recipient_team_id"] != "T1" || start.Args["thread_ts"] != "1700000000.000001" {
		t.Errorf("startStream args = %v", start.Args)
	}

	// An append whose outcome is unknown is not repeated: it could duplicate text.
	ts2, err := c.StartStream(ctx, StreamTarget{Channel: "C1", ThreadTS: "1700000000.000001"}, "a")
	if err != nil {
		t.Fatal(err)
	}
	fake.Fail("chat.appendStream", slacktest.Fault{Status: http.StatusInternalServerError, Commit: true}, 1)
	if err := c.AppendStream(ctx, "C1", ts2, "b"); !errors.Is(err, ErrMaybePosted) {
		t.Errorf("AppendStream err = %v, want ErrMaybePosted", err)
	}
	if m, _ := fake.Message("C1", ts2); m.Text != "ab" {
		t.Errorf("text = %q, want ab (appended once)", m.Text)
	}
	if err := c.StopStream(ctx, "C1", ts, "", nil); !isCode(err, "message_not_in_streaming_state") {
		t.Errorf("stopping a stopped stream: err = %v", err)
	}
}

func isCode(err error, code string) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Code == code
}

func TestClientConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
	}{
		{"", DefaultAPIURL},
		{"http://127.0.0.1:9000", "http://127.0.0.1:9000/api/"},
		{"http://127.0.0.1:9000/", "http://127.0.0.1:9000/api/"},
		{"http://127.0.0.1:9000/api", "http://127.0.0.1:9000/api/"},
		{"https://proxy.example/slack/api/", "https://proxy.example/slack/api/"},
	} {
		if got := apiBase(tc.in); got != tc.want {
			t.Errorf("apiBase(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, cfg := range []ClientConfig{
		{},
		{Token: "xoxb-1", APIURL: "slack.com/api"},
		{Token: "xoxb-1", RateLimitRetries: -1},
	} {
		if _, err := NewClient(cfg); err == nil {
			t.Errorf("NewClient(%+v) = nil error, want one", cfg)
		}
	}
}

// PostEphemeral shows text to user alone in channel; not held back by the
// channel limiter, 429s waited out.
func (c *Client) PostEphemeral(ctx context.Context, channel, user, text string) error {
	return c.call(ctx, "chat.postEphemeral", channel, "", false, false, func(ctx context.Context) error {
		_, err := c.api.PostEphemeralContext(ctx, channel, user, slackapi.MsgOptionText(text, false))
		return err
	})
}
