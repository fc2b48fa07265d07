package metrics

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// counts is a store whose counts the test sets; it counts the reads.
type counts struct {
	reads   atomic.Int64
	running atomic.Int64
	gate    chan struct{} // when set, each read waits for it to close
}

func (c *counts) CountRuns(context.Context) (map[core.RunStatus]int64, error) {
	c.reads.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	return map[core.RunStatus]int64{core.RunRunning: c.running.Load()}, nil
}

func (c *counts) CountApprovals(context.Context) (map[core.ApprovalStatus]int64, error) {
	return map[core.ApprovalStatus]int64{core.ApprovalPending: 2}, nil
}

func (c *counts) Depth(context.Context) (int64, error) { return 7, nil }

// OldestDue: a job due since 12:00 (the tests' clock starts there).
func (c *counts) OldestDue(context.Context) (time.Time, error) {
	return time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), nil
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d", rec.Code)
	}
	return rec.Body.String()
}

func newMetrics(c *counts, now *time.Time) *Metrics {
	m := New(c, c, slog.New(slog.DiscardHandler))
	m.store.now = func() time.Time { return *now }
	return m
}

func TestScrapesWithinTheTTLShareOneCount(t *testing.T) {
	c := &counts{}
	c.running.Store(3)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	m := newMetrics(c, &now)

	for range 5 {
		body := scrape(t, m)
		for _, want := range []string{`agentgate_runs{status="running"} 3`, `agentgate_approvals{status="pending"} 2`, "agentgate_queue_depth 7", "agentgate_queue_oldest_seconds 0\n"} {
			if !strings.Contains(body, want) {
				t.Fatalf("scrape lacks %q:\n%s", want, body)
			}
		}
	}
	if n := c.reads.Load(); n != 1 {
		t.Fatalf("5 scrapes within %s read the store %d times, want 1", CountsTTL, n)
	}
	c.running.Store(4)
	if body := scrape(t, m); !strings.Contains(body, `agentgate_runs{status="running"} 3`) {
		t.Fatal("a scrape within the TTL recounted")
	}
	now = now.Add(CountsTTL)
	if body := scrape(t, m); !strings.Contains(body, `agentgate_runs{status="running"} 4`) || !strings.Contains(body, "agentgate_queue_oldest_seconds 10\n") || c.reads.Load() != 2 {
		t.Fatalf("a scrape after the TTL did not recount (%d reads):\n%s", c.reads.Load(), body)
	}
}

func TestScrapesDuringACountWaitForIt(t *testing.T) {
	c := &counts{gate: make(chan struct{})}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	m := newMetrics(c, &now)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { scrape(t, m) })
	}
	for c.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(c.gate)
	wg.Wait()
	if n := c.reads.Load(); n != 1 {
		t.Fatalf("20 scrapes at once read the store %d times, want 1", n)
	}
}

// A decision counts by outcome and observes how long its approval waited.
func TestApprovalWait(t *testing.T) {
	now := time.Now()
	m := newMetrics(&counts{}, &now)
	decided := now.Add(90 * time.Second)
	m.ApprovalDecided(core.Approval{Status: core.ApprovalApproved, CreatedAt: now, DecidedAt: &decided})
	out := scrape(t, m)
	for _, want := range []string{
		`agentgate_approvals_decided_total{outcome="approved"} 1`,
		`agentgate_approval_wait_seconds_bucket{outcome="approved",le="60"} 0`,
		`agentgate_approval_wait_seconds_bucket{outcome="approved",le="300"} 1`,
		`agentgate_approval_wait_seconds_sum{outcome="approved"} 90`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// withInbox is a store that also tells its inbox backlog.
type withInbox struct {
	*counts
	backlog map[string]core.InboxBacklog
}

func (w withInbox) InboxBacklog(context.Context) (map[string]core.InboxBacklog, error) {
	return w.backlog, nil
}

func TestInboxBacklogGauges(t *testing.T) {
	c := &counts{}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	store := withInbox{counts: c, backlog: map[string]core.InboxBacklog{
		"slack":   {Waiting: 40, Oldest: now.Add(-90 * time.Second)},
		"discord": {Waiting: 2, Oldest: now.Add(-3 * time.Second)}, // its adapter is off: shown anyway
	}}
	m := New(store, c, slog.New(slog.DiscardHandler))
	m.store.now = func() time.Time { return now }
	m.WatchInbox("slack", "telegram")
	body := scrape(t, m)
	for _, want := range []string{
		`agentgate_inbox_waiting{platform="slack"} 40` + "\n", `agentgate_inbox_oldest_seconds{platform="slack"} 90` + "\n",
		`agentgate_inbox_waiting{platform="telegram"} 0` + "\n", `agentgate_inbox_oldest_seconds{platform="telegram"} 0` + "\n",
		`agentgate_inbox_waiting{platform="discord"} 2` + "\n", `agentgate_inbox_oldest_seconds{platform="discord"} 3` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}

	// A store without an inbox has no inbox gauges.
	if body := scrape(t, newMetrics(c, &now)); strings.Contains(body, "agentgate_inbox_") {
		t.Errorf("a store without an inbox shows inbox gauges:\n%s", body)
	}
}
