// Package fault is the multi-replica and fault suite (issue 3): real
// `agentgate serve` processes on one PostgreSQL schema and one private
// redis-server, a fake OpenAI model and a recording tool endpoint, under
// kill -9 of a replica, Redis restarted empty, PostgreSQL cut off, duplicate
// job deliveries and SIGTERM. Each scenario reports runs accepted, completed
// and lost and tool calls executed under two different idempotency keys, and
// fails on any lost run or double execution.
//
// It needs AGENTGATE_TEST_DATABASE_URL (a database the suite may create
// schemas in) and redis-server on PATH, and skips without them:
//
//	AGENTGATE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable go test ./test/fault/
package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/queue/redisstream"
)

// onlyPending is the run's single pending approval.
func onlyPending(t *testing.T, run runJSON) approvalJSON {
	t.Helper()
	if run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("run %s: want paused on one pending approval, got %s", run.ID, asJSON(run))
	}
	return run.PendingApprovals[0]
}

// pause submits a deploy run through r, waits until it is paused on its
// approval and records it in l.
func pause(t *testing.T, l *ledger, r *replica, in string) (runJSON, approvalJSON) {
	t.Helper()
	var run runJSON
	r.json("POST", "/api/v1/agents/ops/runs?wait=true", map[string]string{"input": in}, http.StatusOK, &run)
	l.add(accepted{ID: run.ID, Input: in, Via: r.name})
	return run, onlyPending(t, run)
}

// openRuns counts the runs in l that are not yet terminal.
func (c *cluster) openRuns(l *ledger) int {
	n := 0
	for _, a := range l.all() {
		if run, err := c.runStatus(a.ID); err != nil || !terminal(run.Status) {
			n++
		}
	}
	return n
}

// Scenario 1: three replicas on one PostgreSQL + Redis. A run paused on A is
// approved through B and completes; then A is killed with SIGKILL while it
// executes tool calls and other runs are queued, and every accepted run
// completes on B and C without a tool call running under two keys.
func TestFaultReplicaKill(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := newCluster(t, clusterOptions{replicas: []string{"A", "B", "C"}})
	a, b, cc := c.replica("A"), c.replica("B"), c.replica("C")
	l := &ledger{}

	// A run paused on A continues through B's API.
	run, apr := pause(t, l, a, "deploy handoff-000 to production")
	var decided approvalJSON
	b.json("POST", "/api/v1/approvals/"+apr.ID+"/decision", map[string]string{"decision": "approve", "decided_by": "fault-test"},
		http.StatusOK, &decided)
	if decided.Status != "approved" {
		t.Fatalf("decision through B: %s, want approved", asJSON(decided))
	}
	eventually(t, settleTimeout, "the run paused on A and approved through B to complete", func() (bool, string) {
		var got runJSON
		cc.json("GET", "/api/v1/runs/"+run.ID, nil, http.StatusOK, &got)
		if got.Status == "failed" || got.Status == "cancelled" {
			t.Fatalf("run %s: %s", run.ID, asJSON(got))
		}
		return got.Status == "completed", asJSON(got)
	})
	var executedOn []string
	for _, call := range c.tools.Calls() {
		if strings.HasPrefix(call.Key, run.ID+":") {
			executedOn = append(executedOn, call.Replica)
		}
	}
	t.Logf("run %s: created and paused through A, approved through B, tool executed on %v", run.ID, executedOn)

	// kill -9 of A under load: A holds its tool calls open (they are in
	// flight when it dies), B and C answer theirs after 300ms.
	c.tools.configure(
		func(string) time.Duration { return 300 * time.Millisecond },
		func(replica string) bool { return replica == "A" },
	)
	ap := c.autoApprove([]*replica{b, cc}, nil) // the survivors
	l.submitAll(t, "kill", 60, a, b, cc)
	eventually(t, settleTimeout, "replica A to be executing tool calls", func() (bool, string) {
		n := c.tools.InFlight("A")
		return n >= 2, fmt.Sprintf("%d tool calls in flight on A; calls per replica %v", n, c.toolReplicas())
	})
	inflight := c.tools.InFlight("A")
	a.kill()
	killedAt := time.Now()
	t.Logf("killed A (SIGKILL) with %d tool calls in flight on it and %d of %d runs not finished",
		inflight, c.openRuns(l), len(l.all()))

	c.audit("replica kill -9", l, began)
	approved, refused := ap.counts()
	t.Logf("replica kill -9: audit done %s after the kill; %d approvals by the test (%d refused attempts); tool calls per replica %v",
		time.Since(killedAt).Round(100*time.Millisecond), approved, refused, c.toolReplicas())
}

// Scenario 2: Redis loses its data while runs are executing and others wait
// in the queue — killed and replaced by a fresh, empty redis-server on its
// port, or flushed with FLUSHALL. The store is the source of truth: every
// accepted run completes.
func TestFaultRedisRestartedEmpty(t *testing.T) {
	t.Parallel()
	redisLosesData(t, "redis restarted empty", func(c *cluster, _ *redis.Client) { c.redis.restartEmpty() })
}

func TestFaultRedisFlushAll(t *testing.T) {
	t.Parallel()
	redisLosesData(t, "redis flushed", func(_ *cluster, rdb *redis.Client) {
		if err := rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
	})
}

func redisLosesData(t *testing.T, name string, lose func(*cluster, *redis.Client)) {
	began := time.Now()
	// Two workers per replica, so that runs queue up behind the tool calls.
	c := newCluster(t, clusterOptions{replicas: []string{"A", "B"}, workers: 2})
	a, b := c.replica("A"), c.replica("B")
	l := &ledger{}
	c.tools.configure(func(string) time.Duration { return 500 * time.Millisecond }, nil)
	c.autoApprove(nil, nil)
	rdb := c.redis.client()
	// A routine's result waits in Redis for its next delivery attempt: it is
	// not a run, so the janitor cannot rebuild it; PostgreSQL keeps it until
	// it was handled.
	c.hook.refuse(true)
	var fired struct {
		ID string `json:"id"`
	}
	a.json("POST", "/api/v1/routines/digest/trigger", map[string]string{}, http.StatusAccepted, &fired)
	eventually(t, settleTimeout, "the routine's result delivery to be refused once", func() (bool, string) {
		all, _ := c.hook.seen()
		return len(all) > 0, fmt.Sprintf("webhook requests %v", all)
	})
	l.submitAll(t, "redis", 40, a, b)

	var depth int64
	eventually(t, settleTimeout, "tool calls in flight and jobs waiting in Redis", func() (bool, string) {
		n := c.tools.InFlight("A") + c.tools.InFlight("B")
		d, err := rdb.HLen(t.Context(), "agentgate:{"+c.prefix+"}:jobs").Result()
		depth = d
		// At most 4 jobs are leased (2 replicas × 2 workers): more are waiting.
		return n >= 1 && d >= 6, fmt.Sprintf("%d tool calls in flight, %d jobs in Redis (err %v)", n, d, err)
	})
	open := c.openRuns(l)
	lose(c, rdb)
	lostAt := time.Now()
	if n, err := rdb.DBSize(t.Context()).Result(); err == nil {
		t.Logf("%s (%d keys now) with %d jobs lost from it, %d of %d runs not finished", name, n, depth, open, len(l.all()))
	}
	// Work keeps arriving afterwards.
	l.submitAll(t, "redis-after", 6, a, b)
	c.hook.refuse(false)

	c.audit(name, l, began)
	eventually(t, settleTimeout, "the routine's result delivered after the loss", func() (bool, string) {
		all, ok := c.hook.seen()
		return len(ok) > 0, fmt.Sprintf("webhook requests %v, accepted %v", all, ok)
	})
	if all, _ := c.hook.seen(); slices.ContainsFunc(all, func(k string) bool { return k != fired.ID }) {
		t.Errorf("webhook requests carry keys %v, want every one %s (the run's result, retried)", all, fired.ID)
	}
	t.Logf("%s: audit done %s after the loss", name, time.Since(lostAt).Round(100*time.Millisecond))
}

// Scenario 3: PostgreSQL is cut off for a few seconds (every connection
// closed, new ones refused). Meanwhile new runs and decisions get a clear 503
// ("unavailable") at once; the decision is refused, not lost: the approval
// is still pending afterwards and deciding again works. Work in flight
// resumes, and every run accepted before or after completes.
func TestFaultPostgresOutage(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := newCluster(t, clusterOptions{replicas: []string{"A", "B"}})
	a, b := c.replica("A"), c.replica("B")
	l := &ledger{}
	run, target := pause(t, l, a, "deploy outage-000 to production")
	c.tools.configure(func(string) time.Duration { return 500 * time.Millisecond }, nil)
	c.autoApprove(nil, func(ap approvalJSON) bool { return ap.ID == target.ID })
	l.submitAll(t, "pg-before", 30, a, b)
	eventually(t, settleTimeout, "tool calls in flight", func() (bool, string) {
		n := c.tools.InFlight("A") + c.tools.InFlight("B")
		return n >= 1, fmt.Sprintf("%d tool calls in flight", n)
	})

	const outage = 4 * time.Second
	open := c.openRuns(l)
	c.proxy.Down()
	downAt := time.Now()
	// The API refuses at once, with a 503 that says what happened.
	unavailable := func(what string, status int, body []byte, err error, took time.Duration) {
		t.Helper()
		var e errorJSON
		if err != nil {
			t.Errorf("during the outage, %s: %v (after %s), want a 503 answer", what, err, took)
			return
		}
		if jerr := json.Unmarshal(body, &e); jerr != nil || status != http.StatusServiceUnavailable || e.Error.Code != "unavailable" {
			t.Errorf("during the outage, %s: %d %s, want 503 with code \"unavailable\"", what, status, body)
		}
		if took > outage/2 {
			t.Errorf("during the outage, %s took %s to answer, want an answer at once", what, took)
		}
		t.Logf("during the outage, %s: %d %s in %s", what, status, e.Error.Code, took.Round(time.Millisecond))
	}
	for _, r := range []*replica{a, b} {
		// Readiness reports the outage, so a load balancer can steer away.
		if status, body, err := r.try("GET", "/readyz", nil); err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("during the outage, GET /readyz on %s = %d %s %v, want 503", r.name, status, body, err)
		}
		session := "ses-outage-" + r.name
		start := time.Now()
		status, body, err := r.try("POST", "/api/v1/agents/ops/runs", map[string]string{
			"input": "chat outage-" + r.name, "session_id": session})
		unavailable("POST /api/v1/agents/ops/runs on "+r.name, status, body, err, time.Since(start))
		if status == http.StatusAccepted || status == http.StatusOK {
			var got runJSON
			_ = json.Unmarshal(body, &got)
			l.add(accepted{ID: got.ID, Input: "chat outage-" + r.name, Via: r.name})
		}
		start = time.Now()
		status, body, err = r.try("POST", "/api/v1/approvals/"+target.ID+"/decision",
			map[string]string{"decision": "approve", "decided_by": "fault-test"})
		unavailable("POST /api/v1/approvals/"+target.ID+"/decision on "+r.name, status, body, err, time.Since(start))
	}
	// The outage lasts `outage`, whatever the requests above took.
	<-time.After(time.Until(downAt.Add(outage)))
	c.proxy.Up()
	upAt := time.Now()
	cut, refused := c.proxy.stats()
	t.Logf("PostgreSQL cut off for %s: %d connections closed, %d refused; %d of %d runs not finished when it went down",
		upAt.Sub(downAt).Round(100*time.Millisecond), cut, refused, open, len(l.all()))

	// The refused decision was not recorded: the approval is still pending.
	var got approvalJSON
	eventually(t, settleTimeout, "the API to read the approval again", func() (bool, string) {
		status, body, err := b.try("GET", "/api/v1/approvals/"+target.ID, nil)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %s %v", status, body, err)
		}
		return json.Unmarshal(body, &got) == nil, string(body)
	})
	if got.Status != "pending" {
		t.Fatalf("approval %s after a decision refused during the outage = %s, want pending", target.ID, asJSON(got))
	}
	// Nor the runs refused during the outage.
	for _, r := range []*replica{a, b} {
		if status, body, err := r.try("GET", "/api/v1/sessions/ses-outage-"+r.name, nil); err != nil || status != http.StatusNotFound {
			t.Errorf("session of a run refused during the outage: GET = %d %s %v, want 404 (nothing was changed)", status, body, err)
		}
	}
	// Deciding again works.
	var decided approvalJSON
	b.json("POST", "/api/v1/approvals/"+target.ID+"/decision", map[string]string{"decision": "approve", "decided_by": "fault-test"},
		http.StatusOK, &decided)
	if decided.Status != "approved" {
		t.Fatalf("decision after the outage: %s, want approved", asJSON(decided))
	}
	l.submitAll(t, "pg-after", 10, a, b)

	c.audit("postgres outage", l, began)
	t.Logf("postgres outage: audit done %s after PostgreSQL came back; run %s was approved after the outage",
		time.Since(upAt).Round(100*time.Millisecond), run.ID)
}

// Scenario 4: extra deliveries of run jobs: copies enqueued through the
// queue (as a relay forwarding twice would) while runs wait and while they
// execute, and second stream entries for jobs already delivered (as a
// redelivery would). Each tool call still executes once, under its one key,
// and each run completes once.
func TestFaultDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := newCluster(t, clusterOptions{replicas: []string{"A", "B"}})
	a, b := c.replica("A"), c.replica("B")
	l := &ledger{}
	rdb := c.redis.client()
	q, err := redisstream.New(rdb, redisstream.Options{Prefix: c.prefix})
	if err != nil {
		t.Fatal(err)
	}
	c.tools.configure(func(string) time.Duration { return time.Second }, nil)
	c.autoApprove(nil, nil)

	copies, entries := 0, 0
	duplicate := func(runs []accepted) {
		t.Helper()
		for _, r := range runs {
			p, _ := json.Marshal(core.RunJob{RunID: r.ID})
			for range 2 {
				if err := q.Enqueue(t.Context(), core.Job{Kind: core.JobRun, Payload: p}); err != nil {
					t.Fatalf("enqueue a copy of run %s's job: %v", r.ID, err)
				}
				copies++
			}
		}
	}
	l.submitAll(t, "dup", 16, a, b)
	duplicate(l.all()) // while the runs wait or start

	eventually(t, settleTimeout, "tool calls in flight", func() (bool, string) {
		n := c.tools.InFlight("A") + c.tools.InFlight("B")
		return n >= 2, fmt.Sprintf("%d tool calls in flight", n)
	})
	var open []accepted
	for _, r := range l.all() {
		if run, err := c.runStatus(r.ID); err == nil && !terminal(run.Status) {
			open = append(open, r)
		}
	}
	duplicate(open) // while they execute
	// A second stream entry for every job that is delivered right now.
	keys := "agentgate:{" + c.prefix + "}:"
	recs, err := rdb.HGetAll(t.Context(), keys+"jobs").Result()
	if err != nil {
		t.Fatal(err)
	}
	for id, rec := range recs {
		var r struct {
			Kind  string `json:"kind"`
			Lease string `json:"lease"`
		}
		if json.Unmarshal([]byte(rec), &r) != nil || r.Kind != core.JobRun || r.Lease == "" {
			continue
		}
		// The queue's entry format: XADD <stream> * job <job id>.
		if err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: keys + "stream", Values: []string{"job", id}}).Err(); err != nil {
			t.Fatalf("XADD a second entry for job %s: %v", id, err)
		}
		entries++
	}
	t.Logf("pushed %d extra jobs for %d runs and %d second stream entries for delivered jobs", copies, len(l.all()), entries)

	c.audit("duplicate deliveries", l, began)
	// At least once, and here exactly once: a duplicate must not make a
	// worker give up a tool call it is executing.
	perKey := map[string]int{}
	for _, call := range c.tools.Calls() {
		perKey[call.Key]++
	}
	for key, n := range perKey {
		if n != 1 {
			t.Errorf("duplicate deliveries: tool call %s executed %d times, want once", key, n)
		}
	}
}

// Graceful shutdown: SIGTERM to a replica with tool calls in flight. It stops
// taking work, lets its in-flight steps finish within the drain budget
// (one call is held open past it, so that step is interrupted and handed
// back), exits 0, and the other replica completes every run.
func TestFaultGracefulShutdown(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := newCluster(t, clusterOptions{replicas: []string{"A", "B"}})
	a, b := c.replica("A"), c.replica("B")
	l := &ledger{}
	held := 0
	c.tools.configure(
		func(replica string) time.Duration {
			if replica == "A" {
				return 1500 * time.Millisecond
			}
			return 200 * time.Millisecond
		},
		func(replica string) bool { // A's first call outlives the drain budget
			if replica == "A" && held == 0 {
				held++
				return true
			}
			return false
		},
	)
	c.autoApprove(nil, nil)
	l.submitAll(t, "drain", 24, a, b)
	eventually(t, settleTimeout, "replica A to be executing tool calls", func() (bool, string) {
		n := c.tools.InFlight("A")
		return n >= 2, fmt.Sprintf("%d tool calls in flight on A", n)
	})
	inflight, open := c.tools.InFlight("A"), c.openRuns(l)
	exit, took := a.terminate(drainTimeout + 5*time.Second)
	if exit != nil {
		t.Errorf("replica A after SIGTERM exited with %v, want exit status 0", exit)
	}
	if !strings.Contains(a.out.String(), "shutting down") {
		t.Errorf("replica A did not log its shutdown:\n%s", tail(a.out.String(), 40))
	}
	t.Logf("SIGTERM to A with %d tool calls in flight and %d of %d runs not finished: exited (%v) after %s",
		inflight, open, len(l.all()), exit, took.Round(100*time.Millisecond))
	l.submitAll(t, "drain-after", 4, b)

	c.audit("graceful shutdown", l, began)
	// The step interrupted at the drain timeout was handed back: B executed
	// that tool call again, under the same key.
	calls := c.tools.Calls()
	for i, call := range calls {
		if call.Replica != "A" || call.Done {
			continue
		}
		again := false
		for _, later := range calls[i+1:] {
			again = again || later.Replica == "B" && later.Key == call.Key && later.Done
		}
		if !again {
			t.Errorf("tool call %s was cut off on A at shutdown and never executed on B", call.Key)
		}
	}
}
