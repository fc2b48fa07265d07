package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/postgres"
)

// tripStep is one counted call of TestRoundTrips.
type tripStep struct {
	op     string
	before int64 // round trips at commit 9c00de1, before transactions were pipelined
	max    int64 // the bound: what the store takes now
	setup  func() error
	do     func() error
}

// countTrips runs the steps in order, counting each one's round trips
// (RoundTrips before and after do; setup is not counted), fails a step
// that takes more than its bound and logs the table of counts.
func countTrips(t *testing.T, db *postgres.DB, steps []tripStep) {
	t.Helper()
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-40s %6s %6s %6s\n", "operation", "before", "now", "max")
	var before, now int64
	for _, s := range steps {
		if s.setup != nil {
			if err := s.setup(); err != nil {
				t.Fatalf("%s: setup: %v", s.op, err)
			}
		}
		n0 := db.RoundTrips()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.op, err)
		}
		n := db.RoundTrips() - n0
		before, now = before+s.before, now+n
		fmt.Fprintf(&table, "%-40s %6d %6d %6d\n", s.op, s.before, n, s.max)
		if n > s.max {
			t.Errorf("%s took %d round trips, want at most %d", s.op, n, s.max)
		}
	}
	fmt.Fprintf(&table, "%-40s %6d %6d\n", "total", before, now)
	t.Log(table.String())
}

// tripRun builds the NewRun of a chat run in session sid with one user
// message, like the engine's Submit.
func tripRun(sid, input, dedupe string, at time.Time) core.NewRun {
	return core.NewRun{
		Session: core.Session{ID: sid, AgentID: "agent", Title: "trips", CreatedAt: at, UpdatedAt: at},
		Run: core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: "agent", Type: core.RunTypeChat,
			Input: input, CreatedAt: at},
		Events:    []core.Event{core.NewEvent(core.EventUserMessage, core.UserMessage{Text: input})},
		Platform:  "api",
		DedupeKey: dedupe,
	}
}

func tripStatus(s core.RunStatus) []core.Event {
	return []core.Event{core.NewEvent(core.EventStatus, core.StatusChange{Status: s})}
}

// startSteps are the engine's calls for a run in session sid, from its
// submission to its claim and the reads of its journal and history: *run is
// the run, *job its job.
func startSteps(ctx context.Context, db *postgres.DB, sid string, at time.Time, run *core.Run, job *core.Job) []tripStep {
	return []tripStep{
		{op: "CreateRun", before: 7, max: 2, do: func() (err error) {
			*run, err = db.CreateRun(ctx, tripRun(sid, "hi", "", at))
			return err
		}},
		{op: "Dequeue", before: 4, max: 1, do: func() (err error) {
			var ok bool
			if *job, ok, err = db.TryDequeue(ctx, "w1", time.Minute); err == nil && !ok {
				err = fmt.Errorf("no job is due")
			}
			return err
		}},
		// The engine's GetRun, SessionHead, ClaimRun, Events and
		// SessionHistory (9 round trips before pipelining, 5 after) in one.
		{op: "StartRun", before: 9, max: 1, do: func() error {
			_, err := db.StartRun(ctx, core.Start{ID: run.ID, Owner: "w1", Now: at, Until: at.Add(time.Hour),
				Events: tripStatus(core.RunRunning), History: 20})
			return err
		}},
	}
}

// readSteps are the reads StartRun replaced in the engine, still used by
// the API.
func readSteps(ctx context.Context, db *postgres.DB, sid string, run *core.Run) []tripStep {
	return []tripStep{
		{op: "GetRun", before: 1, max: 1, do: func() error { _, err := db.GetRun(ctx, run.ID); return err }},
		{op: "SessionHead", before: 1, max: 1, do: func() error { _, err := db.SessionHead(ctx, sid); return err }},
		{op: "Events", before: 1, max: 1, do: func() error { _, err := db.Events(ctx, run.ID, 0, 0); return err }},
		{op: "SessionHistory", before: 2, max: 1, do: func() error {
			_, err := db.SessionHistory(ctx, sid, run.ID, 20)
			return err
		}},
	}
}

// TestRoundTrips counts the round trips to PostgreSQL of each hot store and
// queue operation, and fails when one takes more than it does now, so that
// a change that adds a round trip shows. go test -v -run TestRoundTrips
// logs the table, next to the counts before transactions were pipelined.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{})
	ctx := t.Context()
	t0 := time.Now().UTC().Add(-time.Minute)
	sid := core.NewID("ses")
	var (
		first, second core.Run
		job           core.Job
		approvalID    = core.NewID("apr")
	)
	dequeue := func() error {
		j, ok, err := db.TryDequeue(ctx, "w1", time.Minute)
		if err == nil && !ok {
			err = fmt.Errorf("no job is due")
		}
		job = j
		return err
	}
	drainAll := func() error { drain(t, db); return nil }
	steps := append(startSteps(ctx, db, sid, t0, &first, &job), readSteps(ctx, db, sid, &first)...)
	countTrips(t, db, append(steps, []tripStep{
		{op: "CreateRun (dedupe key, known session)", before: 8, max: 2, do: func() (err error) {
			second, err = db.CreateRun(ctx, tripRun(sid, "again", "msg-1", t0))
			return err
		}},
		{op: "AppendEvents", before: 4, max: 1, do: func() error {
			_, err := db.AppendEvents(ctx, first.ID, "w1", []core.Event{
				{Type: core.EventModelResponse, Data: json.RawMessage(`{"text":"a"}`)},
				{Type: core.EventToolStarted, Data: json.RawMessage(`{"name":"b"}`)},
			})
			return err
		}},
		{op: "ExtendClaim", before: 1, max: 1, do: func() error {
			return db.ExtendClaim(ctx, first.ID, "w1", t0.Add(2*time.Hour))
		}},
		{op: "PauseRun", before: 8, max: 2, do: func() error {
			a := core.Approval{ID: approvalID, ToolCallID: "call_1", Tool: "deploy", Arguments: json.RawMessage(`{}`),
				ExpiresAt: t0.Add(time.Hour)}
			_, err := db.PauseRun(ctx, first.ID, "w1", a, tripStatus(core.RunPaused))
			return err
		}},
		{op: "DecideApproval", before: 9, max: 2, do: func() error {
			_, err := db.DecideApproval(ctx, approvalID, core.Decision{Status: core.ApprovalApproved, By: "boss", Via: "api", At: t0})
			return err
		}},
		{op: "ClaimRun (resume)", before: 4, max: 1, do: func() error {
			_, err := db.ClaimRun(ctx, first.ID, "w1", t0, t0.Add(time.Hour), tripStatus(core.RunRunning))
			return err
		}},
		{op: "FinishRun (ack, next run)", before: 12, max: 2, do: func() error {
			_, err := db.FinishRun(ctx, first.ID, "w1", core.Finish{Status: core.RunCompleted, Output: "done", At: t0,
				Events: tripStatus(core.RunCompleted), Ack: &job})
			return err
		}},
		{op: "CancelRun", before: 9, max: 2, do: func() error {
			_, err := db.CancelRun(ctx, second.ID, core.Cancel{By: "u1", Reason: "stop", At: t0})
			return err
		}},
		// The queue's steps start from an empty queue.
		{op: "Enqueue", before: 4, max: 1, setup: drainAll, do: func() error {
			return db.Enqueue(ctx, core.Job{Kind: "deliver", Key: "deliver:1", Payload: json.RawMessage(`{}`)})
		}},
		{op: "Enqueue (no key)", before: 4, max: 1, do: func() error {
			return db.Enqueue(ctx, core.Job{Kind: "deliver", Payload: json.RawMessage(`{}`)})
		}},
		{op: "TryDequeue (queue)", before: 4, max: 1, do: dequeue},
		{op: "Extend", before: 1, max: 1, do: func() error { return db.Extend(ctx, job, time.Minute) }},
		{op: "Fail", before: 4, max: 2, do: func() error { _, err := db.Fail(ctx, job, "boom", time.Hour); return err }},
		{op: "Ack", before: 1, max: 1, setup: dequeue, do: func() error { return db.Ack(ctx, job) }},
		{op: "TryDequeue (none due)", before: 3, max: 1, do: func() error {
			if _, ok, err := db.TryDequeue(ctx, "w1", time.Minute); ok || err != nil {
				return fmt.Errorf("TryDequeue = %v, %v; want no job", ok, err)
			}
			return nil
		}},
	}...))
}

// TestRoundTripsPerRun counts the store calls of one single-turn run as the
// engine makes them (submit, dequeue, load, claim, read the journal and
// history, finish acking the job, read the result).
func TestRoundTripsPerRun(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{})
	ctx := t.Context()
	now := time.Now().UTC()
	var (
		run core.Run
		job core.Job
	)
	countTrips(t, db, append(startSteps(ctx, db, core.NewID("ses"), now, &run, &job), []tripStep{
		{op: "FinishRun", before: 10, max: 2, do: func() error {
			evs := append([]core.Event{{Type: core.EventModelResponse, Data: json.RawMessage(`{"text":"hello"}`)}},
				tripStatus(core.RunCompleted)...)
			_, err := db.FinishRun(ctx, run.ID, "w1", core.Finish{Status: core.RunCompleted, Output: "hello", At: now,
				Events: evs, Ack: &job})
			return err
		}},
		{op: "GetRun", before: 1, max: 1, do: func() error { _, err := db.GetRun(ctx, run.ID); return err }},
	}...))
}
