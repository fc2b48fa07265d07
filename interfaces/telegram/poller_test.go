package telegram_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/agentgate/agentgate/interfaces/telegram"
	"github.com/agentgate/agentgate/interfaces/telegram/telegramtest"
)

// capTransport counts the calls made through it and cancels the test's
// context at the max-th: a poller that does not wait ends there instead
// of spinning forever.
type capTransport struct {
	calls  atomic.Int64
	max    int64
	cancel context.CancelFunc
}

func (c *capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.calls.Add(1) >= c.max {
		c.cancel()
	}
	return http.DefaultTransport.RoundTrip(r)
}

type ingestFunc func(ctx context.Context, u models.Update) error

func (f ingestFunc) Ingest(ctx context.Context, u models.Update) error { return f(ctx, u) }

// A Bot API that answers getUpdates at once (no update, or a refusal) is
// not called in a busy loop: an early empty answer waits a second, a
// refusal a backoff doubling from 1s up to 30s (a 429 its retry_after),
// reset by the next answer. The poller runs on a fake clock its sleeps
// move, for a bounded window of it.
func TestPollerBacksOff(t *testing.T) {
	t.Parallel()
	const s = time.Second
	fail := telegramtest.Refusal{Code: http.StatusInternalServerError, Description: "Internal Server Error"}
	tests := []struct {
		name   string
		setup  func(fake *telegramtest.Server)
		window time.Duration
		// onSleep runs at the i-th sleep (from 0), before it.
		onSleep func(fake *telegramtest.Server, i int)
		want    []time.Duration // the sleeps, in order
	}{
		{
			name:   "empty answers at once",
			setup:  func(fake *telegramtest.Server) { fake.HurryPolls() },
			window: 2 * time.Minute,
			want:   slices.Repeat([]time.Duration{s}, 120),
		},
		{
			name:   "refusals back off, capped",
			setup:  func(fake *telegramtest.Server) { fake.Refuse("getUpdates", -1, fail) },
			window: 5 * time.Minute,
			want:   []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s, 30 * s},
		},
		{
			name: "429 waits its retry_after",
			setup: func(fake *telegramtest.Server) {
				fake.Refuse("getUpdates", -1, telegramtest.Refusal{Code: http.StatusTooManyRequests,
					Description: "Too Many Requests: retry after 7", RetryAfter: 7})
			},
			window: 70 * s,
			want:   slices.Repeat([]time.Duration{7 * s}, 10),
		},
		{
			name: "an answer resets the backoff",
			setup: func(fake *telegramtest.Server) {
				fake.HurryPolls()
				fake.Refuse("getUpdates", 3, fail)
			},
			window: 12 * s,
			onSleep: func(fake *telegramtest.Server, i int) {
				if i == 3 { // after the first answer: one more refusal
					fake.Refuse("getUpdates", 1, fail)
				}
			},
			// 3 refusals, an early empty answer, a refusal (1s again, not
			// 8s), then early empty answers.
			want: []time.Duration{s, 2 * s, 4 * s, s, s, s, s, s},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := telegramtest.New(token)
			t.Cleanup(fake.Close)
			tt.setup(fake)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			maxCalls := int64(len(tt.want)) + 50
			transport := &capTransport{max: maxCalls, cancel: cancel}
			client, err := telegram.NewClient(telegram.ClientConfig{Token: token, APIURL: fake.URL,
				HTTPClient: &http.Client{Transport: transport}})
			if err != nil {
				t.Fatal(err)
			}
			clock := &testClock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
			end := clock.Now().Add(tt.window)
			var sleeps []time.Duration
			p := &telegram.Poller{Client: client, Timeout: 25 * s, Clock: clock,
				Sink: ingestFunc(func(context.Context, models.Update) error { return nil }),
				Sleep: func(ctx context.Context, d time.Duration) {
					if tt.onSleep != nil {
						tt.onSleep(fake, len(sleeps))
					}
					sleeps = append(sleeps, d)
					clock.advance(d)
					if !clock.Now().Before(end) {
						cancel()
					}
				}}
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			calls := int64(fake.Calls("getUpdates"))
			if calls >= maxCalls {
				t.Fatalf("getUpdates called %d times in %s of the clock (sleeps %v), want %d: a busy loop",
					calls, tt.window, sleeps, len(tt.want))
			}
			if !slices.Equal(sleeps, tt.want) {
				t.Fatalf("sleeps = %v, want %v", sleeps, tt.want)
			}
			if calls != int64(len(tt.want)) {
				t.Fatalf("getUpdates called %d times, want %d (one per sleep)", calls, len(tt.want))
			}
		})
	}
}
