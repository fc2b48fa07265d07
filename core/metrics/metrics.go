// Package metrics exposes the gateway's Prometheus metrics: runs by status,
// queue depth, approvals by outcome and decision-to-resume latency.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentgate/agentgate/core"
)

// Metrics is a registry with agentgate's metrics. It implements
// core.Observer and approval.Observer.
type Metrics struct {
	reg       *prometheus.Registry
	finished  *prometheus.CounterVec
	decisions *prometheus.CounterVec
	resume    prometheus.Histogram
	wait      *prometheus.HistogramVec
	jobs      *prometheus.CounterVec
	jobTime   *prometheus.HistogramVec
	pruned    *prometheus.CounterVec
	queueWait *prometheus.HistogramVec
	calls     *prometheus.CounterVec
	store     *storeCollector
}

var (
	_ core.JobObserver     = (*Metrics)(nil)
	_ core.JobWaitObserver = (*Metrics)(nil)
)

// Counter is what the metrics read from the store: rows by status.
type Counter interface {
	CountRuns(ctx context.Context) (map[core.RunStatus]int64, error)
	CountApprovals(ctx context.Context) (map[core.ApprovalStatus]int64, error)
}

// Committer is a store that counts its commits (the embedded store).
type Committer interface {
	Commits() (commits, txs int64)
}

// RoundTripCounter is a store that counts its round trips to a server
// (PostgreSQL).
type RoundTripCounter interface {
	RoundTrips() int64
}

// Depther is what the metrics read from the queue.
type Depther interface {
	Depth(ctx context.Context) (int64, error)
}

// CountsTTL is how long the counts read from the store (runs and
// approvals by status, queue depth) are reused: scrapes within it, and
// scrapes that arrive while a count runs, cost the store nothing more.
const CountsTTL = 10 * time.Second

// New registers the metrics. Store and queue are read at scrape time, at
// most once per CountsTTL, for the runs-by-status and queue-depth gauges.
func New(store Counter, queue Depther, log *slog.Logger) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentgate_runs_finished_total", Help: "Runs finished by this process, by final status.",
		}, []string{"status"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentgate_approvals_decided_total", Help: "Approval decisions made through this process, by outcome.",
		}, []string{"outcome"}),
		resume: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentgate_approval_resume_seconds",
			Help:    "Time from an approval decision to the approved tool call starting.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentgate_approval_wait_seconds",
			Help:    "Time an approval waited from its request to its decision, by outcome (approved, denied, expired, cancelled).",
			Buckets: []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600},
		}, []string{"outcome"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentgate_jobs_total", Help: "Jobs other than run steps handled by this process, by kind and outcome (ok, failed).",
		}, []string{"kind", "outcome"}),
		jobTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentgate_job_seconds",
			Help:    "Time a job other than a run step took to handle, by kind.",
			Buckets: []float64{.001, .005, .025, .1, .25, 1, 2.5, 10, 30},
		}, []string{"kind"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentgate_pruned_total", Help: "Items retention removed, by kind (runs, inbox, outbox, dead_jobs, audit, blobs).",
		}, []string{"what"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentgate_queue_wait_seconds",
			Help:    "Time a job waited from being due to a worker of this process taking it, by kind (run: a run step).",
			Buckets: []float64{.001, .005, .025, .1, .5, 1, 5, 30, 120, 600},
		}, []string{"kind"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentgate_platform_requests_total",
			Help: "Requests to the chat platforms' APIs, by platform and outcome (ok, rate_limited, client_error, server_error, unreachable).",
		}, []string{"platform", "outcome"}),
	}
	m.store = &storeCollector{store: store, queue: queue, log: log, now: time.Now}
	m.store.inbox, _ = store.(core.InboxBacklogger)
	m.reg.MustRegister(m.finished, m.decisions, m.resume, m.wait, m.jobs, m.jobTime, m.pruned, m.queueWait, m.calls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.store)
	if c, ok := store.(Committer); ok {
		m.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentgate_store_commits_total",
				Help: "Commits the embedded store made (each one fsync with synchronous=full)."},
				func() float64 { n, _ := c.Commits(); return float64(n) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentgate_store_write_transactions_total",
				Help: "Write transactions the embedded store committed; several can share one commit."},
				func() float64 { _, n := c.Commits(); return float64(n) }))
	}
	if t, ok := store.(RoundTripCounter); ok {
		m.RoundTrips("store", "PostgreSQL", t.RoundTrips)
	}
	return m
}

// WatchInbox names chat platforms whose inbox gauges
// (agentgate_inbox_waiting, agentgate_inbox_oldest_seconds) are shown even
// while none of their messages waits. Call it before serving.
func (m *Metrics) WatchInbox(platforms ...string) {
	m.store.mu.Lock()
	defer m.store.mu.Unlock()
	m.store.platforms = append(m.store.platforms, platforms...)
}

// RoundTrips registers agentgate_<name>_round_trips_total, the round trips
// to server (PostgreSQL, Redis) that count reports.
func (m *Metrics) RoundTrips(name, server string, count func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentgate_" + name + "_round_trips_total",
		Help: "Round trips to " + server + " (queries, transactions' begin and commit, batches, pipelines)."},
		func() float64 { return float64(count()) }))
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// RunFinished counts a finished run.
func (m *Metrics) RunFinished(s core.RunStatus) { m.finished.WithLabelValues(string(s)).Inc() }

// ToolResumed observes decision-to-tool latency.
func (m *Metrics) ToolResumed(d time.Duration) { m.resume.Observe(d.Seconds()) }

// JobDone counts a handled job (core.LogJobs).
func (m *Metrics) JobDone(kind string, took time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	m.jobs.WithLabelValues(kind, outcome).Inc()
	m.jobTime.WithLabelValues(kind).Observe(took.Seconds())
}

// JobWaited observes how long a due job waited for a worker
// (core.JobWaitObserver).
func (m *Metrics) JobWaited(kind string, waited time.Duration) {
	m.queueWait.WithLabelValues(kind).Observe(max(waited, 0).Seconds())
}

// PlatformCall counts a request to a chat platform's API (chat.APIObserver).
func (m *Metrics) PlatformCall(platform, outcome string) {
	m.calls.WithLabelValues(platform, outcome).Inc()
}

// Pruned counts what retention removed.
func (m *Metrics) Pruned(what core.Prunable, n int) {
	m.pruned.WithLabelValues(string(what)).Add(float64(n))
}

// ApprovalDecided counts a decision and observes how long it waited.
func (m *Metrics) ApprovalDecided(a core.Approval) {
	m.decisions.WithLabelValues(string(a.Status)).Inc()
	if a.DecidedAt != nil && !a.CreatedAt.IsZero() {
		m.wait.WithLabelValues(string(a.Status)).Observe(max(a.DecidedAt.Sub(a.CreatedAt), 0).Seconds())
	}
}

var (
	runsDesc      = prometheus.NewDesc("agentgate_runs", "Runs in the store, by status.", []string{"status"}, nil)
	approvalsDesc = prometheus.NewDesc("agentgate_approvals", "Approvals in the store, by status.", []string{"status"}, nil)
	depthDesc     = prometheus.NewDesc("agentgate_queue_depth", "Jobs waiting, delayed or in flight (not dead-lettered).", nil, nil)
	oldestDesc    = prometheus.NewDesc("agentgate_queue_oldest_seconds",
		"How long the job that has waited longest for a worker has been due (0 when none waits).", nil, nil)
	inboxWaitingDesc = prometheus.NewDesc("agentgate_inbox_waiting",
		"Chat messages stored and acknowledged to their platform that no run has taken yet, by platform.", []string{"platform"}, nil)
	inboxOldestDesc = prometheus.NewDesc("agentgate_inbox_oldest_seconds",
		"How long the oldest chat message waiting in the inbox has waited since it arrived, by platform (0 when none waits).",
		[]string{"platform"}, nil)
)

// storeCollector reads counts from the store at scrape time, one count in
// flight and at most one per CountsTTL.
type storeCollector struct {
	store Counter
	queue Depther
	inbox core.InboxBacklogger // nil: the store keeps no inbox
	log   *slog.Logger
	now   func() time.Time

	mu        sync.Mutex
	platforms []string  // shown in the inbox gauges even when none waits
	at        time.Time // when cached was counted; zero = never
	cached    []prometheus.Metric
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runsDesc
	ch <- approvalsDesc
	ch <- depthDesc
	if _, ok := c.queue.(core.QueueAger); ok {
		ch <- oldestDesc
	}
	if c.inbox != nil {
		ch <- inboxWaitingDesc
		ch <- inboxOldestDesc
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.at.IsZero() || now.Sub(c.at) >= CountsTTL || now.Before(c.at) {
		c.cached = c.count()
		c.at = now
	}
	for _, m := range c.cached {
		ch <- m
	}
}

// count reads the gauges from the store; a failed read leaves its gauge
// out (and is logged).
func (c *storeCollector) count() []prometheus.Metric {
	var out []prometheus.Metric
	ch := func(m prometheus.Metric) { out = append(out, m) }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if runs, err := c.store.CountRuns(ctx); err == nil {
		for _, s := range []core.RunStatus{core.RunQueued, core.RunRunning, core.RunPaused, core.RunCompleted, core.RunFailed, core.RunCancelled} {
			ch(prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(runs[s]), string(s)))
		}
	} else {
		c.log.Warn("metrics: count runs", "err", err)
	}
	if aps, err := c.store.CountApprovals(ctx); err == nil {
		for _, s := range []core.ApprovalStatus{core.ApprovalPending, core.ApprovalApproved, core.ApprovalDenied, core.ApprovalExpired, core.ApprovalCancelled} {
			ch(prometheus.MustNewConstMetric(approvalsDesc, prometheus.GaugeValue, float64(aps[s]), string(s)))
		}
	} else {
		c.log.Warn("metrics: count approvals", "err", err)
	}
	if d, err := c.queue.Depth(ctx); err == nil {
		ch(prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(d)))
	} else {
		c.log.Warn("metrics: queue depth", "err", err)
	}
	if a, ok := c.queue.(core.QueueAger); ok {
		if due, err := a.OldestDue(ctx); err == nil {
			age := 0.0
			if !due.IsZero() {
				age = max(c.now().Sub(due), 0).Seconds()
			}
			ch(prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age))
		} else {
			c.log.Warn("metrics: queue oldest due", "err", err)
		}
	}
	if c.inbox != nil {
		c.countInbox(ctx, ch)
	}
	return out
}

// countInbox reads the inbox gauges: every platform watched, and any other
// with messages waiting (left by an adapter that is off now).
func (c *storeCollector) countInbox(ctx context.Context, ch func(prometheus.Metric)) {
	backlog, err := c.inbox.InboxBacklog(ctx)
	if err != nil {
		c.log.Warn("metrics: inbox backlog", "err", err)
		return
	}
	platforms := slices.Clone(c.platforms)
	for p := range backlog {
		platforms = append(platforms, p)
	}
	slices.Sort(platforms)
	for _, p := range slices.Compact(platforms) {
		b := backlog[p]
		age := 0.0
		if !b.Oldest.IsZero() { // zero: none waits
			age = max(c.now().Sub(b.Oldest), 0).Seconds()
		}
		ch(prometheus.MustNewConstMetric(inboxWaitingDesc, prometheus.GaugeValue, float64(b.Waiting), p))
		ch(prometheus.MustNewConstMetric(inboxOldestDesc, prometheus.GaugeValue, age, p))
	}
}
