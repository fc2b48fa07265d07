// Package storetest is the conformance suite of core.Store: every store
// implementation runs it (see Run), so the engine, the API and the approval
// flow can rely on the same behaviour from SQLite and PostgreSQL.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Harness is what a store implementation hands the suite for one test.
type Harness struct {
	// Store is the store under test. It must be empty.
	Store core.Store
	// Queue is the queue Store enqueues its jobs into (transactionally). It
	// must be empty and its clock must be the wall clock, so that a job
	// enqueued for "now" is due at once.
	Queue core.Queue
}

// Run runs the suite. newStore is called once per subtest with that
// subtest's t and must return an isolated, empty harness (register any
// cleanup with t.Cleanup). Subtests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) Harness) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"CreateRun", testCreateRun},
		{"CreateRunExistingSession", testCreateRunExistingSession},
		{"CreateRunSessionOfAnotherAgent", testCreateRunSessionAgent},
		{"NotFound", testNotFound},
		{"SessionHead", testSessionHead},
		{"SessionHistory", testSessionHistory},
		{"ClaimRun", testClaimRun},
		{"StartRun", testStartRun},
		{"AppendEvents", testAppendEvents},
		{"PauseRun", testPauseRun},
		{"FinishRun", testFinishRun},
		{"FinishRunAcksItsJob", testFinishRunAcksItsJob},
		{"DecideApproval", testDecideApproval},
		{"DecideApprovalConcurrent", testDecideApprovalConcurrent},
		{"DecideApprovalArgsMismatch", testDecideApprovalArgsMismatch},
		{"CancelRun", testCancelRun},
		{"DueApprovals", testDueApprovals},
		{"Pagination", testPagination},
		{"ApprovalsOfAConversation", testApprovalsOfAConversation},
		{"DefaultPageSize", testDefaultPageSize},
		{"RequeueActive", testRequeueActive},
		{"Counts", testCounts},
		{"Dedupe", testDedupe},
		{"DedupeConcurrent", testDedupeConcurrent},
		{"Outbox", testOutbox},
		{"InboxAppend", testInboxAppend},
		{"InboxOrder", testInboxOrder},
		{"InboxCreateRun", testInboxCreateRun},
		{"InboxClaimConcurrent", testInboxClaimConcurrent},
		{"InboxBacklog", testInboxBacklog},
		{"InboxRestart", testInboxRestart},
		{"ApprovalJobs", testApprovalJobs},
		{"StartedBy", testStartedBy},
		{"DecideApprovalAudit", testDecideApprovalAudit},
		{"CancelRunAudit", testCancelRunAudit},
		{"AuditList", testAuditList},
		{"PruneRuns", testPruneRuns},
		{"PruneRest", testPruneRest},
		{"BlobRefs", testBlobRefs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// t0 is the suite's epoch; whole seconds so every store keeps it exactly.
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const (
	agentA = "agent-a"
	agentB = "agent-b"
	lease  = time.Minute
)

// newRun builds the input of CreateRun for a chat run with one user message.
func newRun(sessionID, agentID, userID, text string, created time.Time) core.NewRun {
	return core.NewRun{
		Session: core.Session{ID: sessionID, AgentID: agentID, UserID: userID},
		Run: core.Run{
			ID: core.NewID("run"), SessionID: sessionID, AgentID: agentID, UserID: userID,
			Type: core.RunTypeChat, Input: text, CreatedAt: created,
		},
		Events: []core.Event{userMessage(text, userID)},
	}
}

func userMessage(text, userID string) core.Event {
	return core.NewEvent(core.EventUserMessage, core.UserMessage{Text: text, UserID: userID})
}

func statusEvent(s core.RunStatus) core.Event {
	return core.NewEvent(core.EventStatus, core.StatusChange{Status: s})
}

func create(t *testing.T, h Harness, nr core.NewRun) core.Run {
	t.Helper()
	r, err := h.Store.CreateRun(t.Context(), nr)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return r
}

// createIn creates a run in a new session of agent A.
func createIn(t *testing.T, h Harness, created time.Time) core.Run {
	t.Helper()
	return create(t, h, newRun(core.NewID("ses"), agentA, "u1", "hello", created))
}

func claim(t *testing.T, h Harness, id, owner string, now time.Time) core.Run {
	t.Helper()
	r, err := h.Store.ClaimRun(t.Context(), id, owner, now, now.Add(lease), []core.Event{statusEvent(core.RunRunning)})
	if err != nil {
		t.Fatalf("ClaimRun(%s, %s): %v", id, owner, err)
	}
	return r
}

func finish(t *testing.T, h Harness, id, owner string, status core.RunStatus, now time.Time) core.Run {
	t.Helper()
	r, err := h.Store.FinishRun(t.Context(), id, owner, core.Finish{
		Status: status, Output: "output of " + id, At: now, Events: []core.Event{statusEvent(status)},
	})
	if err != nil {
		t.Fatalf("FinishRun(%s, %s): %v", id, owner, err)
	}
	return r
}

func getRun(t *testing.T, h Harness, id string) core.Run {
	t.Helper()
	r, err := h.Store.GetRun(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

func getApproval(t *testing.T, h Harness, id string) core.Approval {
	t.Helper()
	a, err := h.Store.GetApproval(t.Context(), id)
	if err != nil {
		t.Fatalf("GetApproval(%s): %v", id, err)
	}
	return a
}

func journal(t *testing.T, h Harness, id string) []core.Event {
	t.Helper()
	evs, err := h.Store.Events(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatalf("Events(%s): %v", id, err)
	}
	return evs
}

// newApproval builds the approval a run asks for before calling tool deploy.
func newApproval(callID string, expires time.Time) core.Approval {
	return core.Approval{
		ID: core.NewID("apr"), ToolCallID: callID, Tool: "deploy", Origin: "mcp:ops",
		Arguments: json.RawMessage(`{"env":"prod","version":"1.2.3"}`), ArgsSHA256: "sha-" + callID,
		Policy: core.ApprovalPolicy{Approvers: []string{"u-boss"}, ExcludeRequester: true}, RequestedBy: "u1",
		CreatedAt: t0, ExpiresAt: expires,
	}
}

// pauseFor claims run id as w1 and pauses it for approval a.
func pauseFor(t *testing.T, h Harness, id string, a core.Approval) core.Run {
	t.Helper()
	claim(t, h, id, "w1", t0)
	ev := core.NewEvent(core.EventApprovalRequested, core.ApprovalRequested{
		ApprovalID: a.ID, ToolCallID: a.ToolCallID, Tool: a.Tool, Arguments: a.Arguments, ExpiresAt: a.ExpiresAt,
	})
	r, err := h.Store.PauseRun(t.Context(), id, "w1", a, []core.Event{ev})
	if err != nil {
		t.Fatalf("PauseRun(%s): %v", id, err)
	}
	return r
}

// pausedRun creates a run in a new session and pauses it for a new approval.
func pausedRun(t *testing.T, h Harness, expires time.Time) (core.Run, core.Approval) {
	t.Helper()
	r := createIn(t, h, t0)
	a := newApproval("call_"+r.ID, expires)
	return pauseFor(t, h, r.ID, a), a
}

func decide(t *testing.T, h Harness, id string, s core.ApprovalStatus, by string) core.Approval {
	t.Helper()
	a, err := h.Store.DecideApproval(t.Context(), id, core.Decision{Status: s, By: by, Via: "api", At: at(time.Minute)})
	if err != nil {
		t.Fatalf("DecideApproval(%s, %s): %v", id, s, err)
	}
	return a
}

// drainJobs takes every due job off the queue, acks it and returns the run
// ids of the run jobs in delivery order (approval jobs are dropped).
func drainJobs(t *testing.T, h Harness) []string {
	t.Helper()
	runs, _ := drainAll(t, h)
	return runs
}

// drainAll takes every due job off the queue, acks it and returns the run
// ids of the run jobs and the "approval_id:status" of the approval jobs.
func drainAll(t *testing.T, h Harness) (runs, approvals []string) {
	t.Helper()
	for {
		j, ok, err := h.Queue.TryDequeue(t.Context(), "storetest", time.Minute)
		if err != nil {
			t.Fatalf("TryDequeue: %v", err)
		}
		if !ok {
			return runs, approvals
		}
		switch j.Kind {
		case core.JobRun:
			var p core.RunJob
			if err := json.Unmarshal(j.Payload, &p); err != nil {
				t.Fatalf("run job payload %s: %v", j.Payload, err)
			}
			runs = append(runs, p.RunID)
		case core.JobApproval:
			var p core.ApprovalJob
			if err := json.Unmarshal(j.Payload, &p); err != nil {
				t.Fatalf("approval job payload %s: %v", j.Payload, err)
			}
			approvals = append(approvals, p.ApprovalID+":"+string(p.Status))
		default:
			t.Errorf("job kind = %q, want %q or %q", j.Kind, core.JobRun, core.JobApproval)
		}
		if err := h.Queue.Ack(t.Context(), j); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

// wantApprovalJobs checks that exactly the approval jobs want
// ("approval_id:status", any order) are due, and drops the run jobs.
func wantApprovalJobs(t *testing.T, h Harness, want ...string) {
	t.Helper()
	_, got := drainAll(t, h)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("due approval jobs = %v, want %v", got, want)
	}
}

// wantJobs checks that exactly the jobs of runs ids (in any order) are due.
func wantJobs(t *testing.T, h Harness, ids ...string) {
	t.Helper()
	got := drainJobs(t, h)
	slices.Sort(got)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, want) {
		t.Errorf("due run jobs = %v, want %v", got, want)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

func wantStatus(t *testing.T, h Harness, id string, want core.RunStatus) core.Run {
	t.Helper()
	r := getRun(t, h, id)
	if r.Status != want {
		t.Errorf("run %s status = %s, want %s", id, r.Status, want)
	}
	return r
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func sameTimePtr(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = nil, want %v", what, want)
		return
	}
	sameTime(t, what, *got, want)
}

// sameJSON compares JSON documents by value (stores may reformat them).
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %v in %s", what, err, got)
		return
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func payload[T any](t *testing.T, e core.Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		t.Fatalf("event %d (%s) data %s: %v", e.Seq, e.Type, e.Data, err)
	}
	return v
}

// wantSeqs checks that evs are the entries of run id numbered from..to.
func wantSeqs(t *testing.T, what, id string, evs []core.Event, from, to int64) {
	t.Helper()
	if int64(len(evs)) != to-from+1 {
		t.Fatalf("%s: %d events, want seq %d..%d", what, len(evs), from, to)
	}
	for i, e := range evs {
		if e.Seq != from+int64(i) || e.RunID != id {
			t.Errorf("%s: event %d = run %s seq %d, want run %s seq %d", what, i, e.RunID, e.Seq, id, from+int64(i))
		}
	}
}

func runIDs(rs []core.Run) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func testCreateRun(t *testing.T, h Harness) {
	ctx := t.Context()
	sid := core.NewID("ses")
	nr := newRun(sid, agentA, "u1", "deploy the app", at(time.Second))
	nr.Session.Binding = core.Binding{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1700000000.0001"}
	nr.Session.Title = "deploys"
	nr.Run.RoutineID = "rtn_1"
	second := userMessage("with tests", "u1")
	second.CreatedAt = at(2 * time.Second)
	nr.Events = append(nr.Events, second)

	r, err := h.Store.CreateRun(ctx, nr)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if r.ID != nr.Run.ID || r.SessionID != sid || r.AgentID != agentA || r.UserID != "u1" || r.Type != core.RunTypeChat ||
		r.Input != "deploy the app" || r.RoutineID != "rtn_1" {
		t.Errorf("CreateRun = %+v, want the fields of %+v", r, nr.Run)
	}
	if r.Status != core.RunQueued || r.LastSeq != 2 || r.StartedAt != nil || r.FinishedAt != nil {
		t.Errorf("CreateRun: status %s, last seq %d, started %v, finished %v; want queued, 2, nil, nil",
			r.Status, r.LastSeq, r.StartedAt, r.FinishedAt)
	}
	sameTime(t, "run created_at", r.CreatedAt, at(time.Second))
	got := getRun(t, h, r.ID)
	if got.Status != r.Status || got.LastSeq != r.LastSeq || got.Input != r.Input || !got.CreatedAt.Equal(r.CreatedAt) {
		t.Errorf("GetRun = %+v, want %+v", got, r)
	}
	if r.Conversation != nr.Session.Binding || got.Conversation != nr.Session.Binding {
		t.Errorf("conversation: created %+v, read %+v; want the session's binding %+v", r.Conversation, got.Conversation, nr.Session.Binding)
	}

	s, err := h.Store.GetSession(ctx, sid)
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if s.AgentID != agentA || s.UserID != "u1" || s.Binding != nr.Session.Binding || s.Title != "deploys" {
		t.Errorf("GetSession = %+v, want the fields of %+v", s, nr.Session)
	}
	sameTime(t, "session created_at", s.CreatedAt, at(time.Second))
	sameTime(t, "session updated_at", s.UpdatedAt, at(time.Second))

	evs := journal(t, h, r.ID)
	wantSeqs(t, "journal", r.ID, evs, 1, 2)
	if evs[0].Type != core.EventUserMessage || payload[core.UserMessage](t, evs[0]).Text != "deploy the app" {
		t.Errorf("event 1 = %s %s, want the user message", evs[0].Type, evs[0].Data)
	}
	sameTime(t, "event 1 created_at (none given: the run's)", evs[0].CreatedAt, at(time.Second))
	sameTime(t, "event 2 created_at (given)", evs[1].CreatedAt, at(2*time.Second))

	wantJobs(t, h, r.ID)
}

func testCreateRunExistingSession(t *testing.T, h Harness) {
	sid := core.NewID("ses")
	first := newRun(sid, agentA, "u1", "one", t0)
	first.Session.Title = "first title"
	r1 := create(t, h, first)
	second := newRun(sid, agentA, "u2", "two", at(time.Minute))
	second.Session.Title = "other title"
	r2 := create(t, h, second)

	s, err := h.Store.GetSession(t.Context(), sid)
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if s.Title != "first title" || s.UserID != "u1" {
		t.Errorf("session = %+v, want it as the first run created it", s)
	}
	sameTime(t, "session created_at", s.CreatedAt, t0)
	sameTime(t, "session updated_at", s.UpdatedAt, at(time.Minute))

	sessions, err := h.Store.ListSessions(t.Context(), core.SessionFilter{})
	if err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	if len(sessions.Items) != 1 {
		t.Errorf("ListSessions: %d sessions, want 1", len(sessions.Items))
	}
	runs, err := h.Store.ListRuns(t.Context(), core.RunFilter{SessionID: sid})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if got := runIDs(runs.Items); !slices.Equal(got, []string{r1.ID, r2.ID}) {
		t.Errorf("runs of session = %v, want %v", got, []string{r1.ID, r2.ID})
	}
	wantSeqs(t, "second run's journal", r2.ID, journal(t, h, r2.ID), 1, 1)
	// Only r1 may advance now; whether r2 also has a job yet is up to the store.
	if jobs := drainJobs(t, h); !slices.Contains(jobs, r1.ID) {
		t.Errorf("due run jobs = %v, want one for %s", jobs, r1.ID)
	}
}

func testCreateRunSessionAgent(t *testing.T, h Harness) {
	sid := core.NewID("ses")
	r1 := create(t, h, newRun(sid, agentA, "u1", "one", t0))
	nr := newRun(sid, agentB, "u1", "two", at(time.Minute))
	_, err := h.Store.CreateRun(t.Context(), nr)
	wantErr(t, "CreateRun in a session of another agent", err, core.ErrSessionAgent)

	_, err = h.Store.GetRun(t.Context(), nr.Run.ID)
	wantErr(t, "GetRun of the rejected run", err, core.ErrNotFound)
	s, err := h.Store.GetSession(t.Context(), sid)
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if s.AgentID != agentA {
		t.Errorf("session agent = %s, want %s", s.AgentID, agentA)
	}
	sameTime(t, "session updated_at", s.UpdatedAt, t0)
	wantJobs(t, h, r1.ID)
}

func testNotFound(t *testing.T, h Harness) {
	ctx := t.Context()
	missing := core.NewID("run")
	checks := []struct {
		name string
		call func() error
	}{
		{"GetRun", func() error { _, err := h.Store.GetRun(ctx, missing); return err }},
		{"GetSession", func() error { _, err := h.Store.GetSession(ctx, core.NewID("ses")); return err }},
		{"GetApproval", func() error { _, err := h.Store.GetApproval(ctx, core.NewID("apr")); return err }},
		{"SessionHead", func() error { _, err := h.Store.SessionHead(ctx, core.NewID("ses")); return err }},
		{"Events", func() error { _, err := h.Store.Events(ctx, missing, 0, 0); return err }},
		{"ClaimRun", func() error {
			_, err := h.Store.ClaimRun(ctx, missing, "w1", t0, at(lease), nil)
			return err
		}},
		{"FinishRun", func() error {
			_, err := h.Store.FinishRun(ctx, missing, "", core.Finish{Status: core.RunFailed, At: t0})
			return err
		}},
		{"CancelRun", func() error { _, err := h.Store.CancelRun(ctx, missing, core.Cancel{At: t0}); return err }},
		{"DecideApproval", func() error {
			_, err := h.Store.DecideApproval(ctx, core.NewID("apr"), core.Decision{Status: core.ApprovalApproved, At: t0})
			return err
		}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, c.name, c.call(), core.ErrNotFound)
		})
	}
}

func testSessionHead(t *testing.T, h Harness) {
	ctx := t.Context()
	sid := core.NewID("ses")
	r1 := create(t, h, newRun(sid, agentA, "u1", "one", t0))
	r2 := create(t, h, newRun(sid, agentA, "u1", "two", at(time.Second)))
	r3 := create(t, h, newRun(sid, agentA, "u1", "three", at(2*time.Second)))
	other := createIn(t, h, at(3*time.Second))
	drainJobs(t, h)

	wantHead := func(what, sessionID, want string) {
		t.Helper()
		head, err := h.Store.SessionHead(ctx, sessionID)
		if err != nil {
			t.Fatalf("%s: SessionHead: %v", what, err)
		}
		if head.ID != want {
			t.Errorf("%s: head = %s, want %s", what, head.ID, want)
		}
	}
	wantHead("new session", sid, r1.ID)
	wantHead("other session", other.SessionID, other.ID)

	claim(t, h, r1.ID, "w1", t0)
	wantHead("head running", sid, r1.ID)
	finish(t, h, r1.ID, "w1", core.RunCompleted, at(time.Minute))
	wantHead("head completed", sid, r2.ID)
	wantJobs(t, h, r2.ID)

	if _, err := h.Store.CancelRun(ctx, r2.ID, core.Cancel{By: "u1", At: at(2 * time.Minute)}); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	wantHead("head cancelled", sid, r3.ID)
	wantJobs(t, h, r3.ID)

	claim(t, h, r3.ID, "w2", at(3*time.Minute))
	finish(t, h, r3.ID, "w2", core.RunFailed, at(4*time.Minute))
	_, err := h.Store.SessionHead(ctx, sid)
	wantErr(t, "SessionHead when every run is finished", err, core.ErrNotFound)
	wantJobs(t, h)
	wantHead("other session at the end", other.SessionID, other.ID)
}

func testSessionHistory(t *testing.T, h Harness) {
	ctx := t.Context()
	sid := core.NewID("ses")
	var rs []core.Run
	for i, st := range []core.RunStatus{core.RunCompleted, core.RunFailed, core.RunCompleted, core.RunCompleted} {
		r := create(t, h, newRun(sid, agentA, "u1", fmt.Sprint("message ", i), at(time.Duration(i)*time.Minute)))
		claim(t, h, r.ID, "w1", r.CreatedAt)
		finish(t, h, r.ID, "w1", st, r.CreatedAt.Add(time.Second))
		rs = append(rs, r)
	}
	last := create(t, h, newRun(sid, agentA, "u1", "latest", at(time.Hour)))
	otherSession := createIn(t, h, at(time.Hour))
	claim(t, h, otherSession.ID, "w1", at(time.Hour))
	finish(t, h, otherSession.ID, "w1", core.RunCompleted, at(time.Hour))

	tests := []struct {
		name   string
		before string
		limit  int
		want   []string
	}{
		{"most recent within limit", last.ID, 2, []string{rs[2].ID, rs[3].ID}},
		{"only completed runs", last.ID, 10, []string{rs[0].ID, rs[2].ID, rs[3].ID}},
		{"before a middle run", rs[2].ID, 10, []string{rs[0].ID}},
		{"before the first run", rs[0].ID, 10, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.Store.SessionHistory(ctx, sid, tc.before, tc.limit)
			if err != nil {
				t.Fatalf("SessionHistory: %v", err)
			}
			if ids := runIDs(got); !slices.Equal(ids, tc.want) {
				t.Errorf("SessionHistory(before %s, %d) = %v, want %v", tc.before, tc.limit, ids, tc.want)
			}
			for _, r := range got {
				if r.Status != core.RunCompleted || r.Output != "output of "+r.ID {
					t.Errorf("history run %s: status %s, output %q; want completed with its output", r.ID, r.Status, r.Output)
				}
			}
		})
	}
}

func testClaimRun(t *testing.T, h Harness) {
	ctx := t.Context()
	r := createIn(t, h, t0)

	got, err := h.Store.ClaimRun(ctx, r.ID, "w1", at(time.Second), at(time.Minute), []core.Event{statusEvent(core.RunRunning)})
	if err != nil {
		t.Fatalf("ClaimRun of a queued run: %v", err)
	}
	if got.Status != core.RunRunning || got.LastSeq != 2 {
		t.Errorf("claimed run: status %s, last seq %d; want running, 2", got.Status, got.LastSeq)
	}
	sameTimePtr(t, "started_at", got.StartedAt, at(time.Second))
	evs := journal(t, h, r.ID)
	wantSeqs(t, "journal after claim", r.ID, evs, 1, 2)
	if evs[1].Type != core.EventStatus || payload[core.StatusChange](t, evs[1]).Status != core.RunRunning {
		t.Errorf("event 2 = %s %s, want status running", evs[1].Type, evs[1].Data)
	}

	claimAt := func(owner string, now, until time.Time) error {
		_, err := h.Store.ClaimRun(ctx, r.ID, owner, now, until, []core.Event{statusEvent(core.RunRunning)})
		return err
	}
	wantErr(t, "ClaimRun by another owner during a live claim", claimAt("w2", at(30*time.Second), at(2*time.Minute)), core.ErrClaimed)
	if err := claimAt("w1", at(30*time.Second), at(2*time.Minute)); err != nil {
		t.Errorf("ClaimRun again by the owner: %v", err)
	}
	wantErr(t, "ClaimRun by another owner after the owner renewed", claimAt("w2", at(90*time.Second), at(3*time.Minute)), core.ErrClaimed)
	if err := h.Store.ExtendClaim(ctx, r.ID, "w1", at(4*time.Minute)); err != nil {
		t.Errorf("ExtendClaim by the owner: %v", err)
	}
	wantErr(t, "ClaimRun by another owner after ExtendClaim", claimAt("w2", at(3*time.Minute), at(5*time.Minute)), core.ErrClaimed)

	// At its expiry the claim can be taken over.
	if err := claimAt("w2", at(4*time.Minute), at(5*time.Minute)); err != nil {
		t.Fatalf("ClaimRun of an expired claim: %v", err)
	}
	got = wantStatus(t, h, r.ID, core.RunRunning)
	sameTimePtr(t, "started_at after takeover (first start)", got.StartedAt, at(time.Second))
	wantErr(t, "ExtendClaim by the previous owner", h.Store.ExtendClaim(ctx, r.ID, "w1", at(10*time.Minute)), core.ErrClaimLost)
	wantErr(t, "ClaimRun by the previous owner", claimAt("w1", at(4*time.Minute), at(6*time.Minute)), core.ErrClaimed)
	if got.LastSeq != 4 {
		t.Errorf("last seq = %d, want 4 (one status event per successful claim, none for refused ones)", got.LastSeq)
	}

	paused, _ := pausedRun(t, h, at(time.Hour))
	_, err = h.Store.ClaimRun(ctx, paused.ID, "w1", at(time.Minute), at(2*time.Minute), nil)
	wantErr(t, "ClaimRun of a paused run", err, core.ErrRunPaused)

	done := createIn(t, h, t0)
	claim(t, h, done.ID, "w1", t0)
	finish(t, h, done.ID, "w1", core.RunCompleted, at(time.Second))
	_, err = h.Store.ClaimRun(ctx, done.ID, "w1", at(time.Minute), at(2*time.Minute), nil)
	wantErr(t, "ClaimRun of a completed run", err, core.ErrRunFinished)

	cancelled := createIn(t, h, t0)
	if _, err := h.Store.CancelRun(ctx, cancelled.ID, core.Cancel{At: t0}); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	_, err = h.Store.ClaimRun(ctx, cancelled.ID, "w1", at(time.Minute), at(2*time.Minute), nil)
	wantErr(t, "ClaimRun of a cancelled run", err, core.ErrRunFinished)
	if n := len(journal(t, h, cancelled.ID)); n != 2 {
		t.Errorf("cancelled run has %d events after a refused claim, want 2", n)
	}
}

func testAppendEvents(t *testing.T, h Harness) {
	ctx := t.Context()
	r := createIn(t, h, t0)

	_, err := h.Store.AppendEvents(ctx, r.ID, "w1", []core.Event{statusEvent(core.RunRunning)})
	wantErr(t, "AppendEvents to an unclaimed run", err, core.ErrClaimLost)

	claim(t, h, r.ID, "w1", t0) // seq 2
	resp := core.ModelResponse{
		ToolCalls: []core.ToolCall{{ID: "call_1", Name: "search", Arguments: json.RawMessage(`{"q":"status"}`)}},
		Usage:     core.Usage{InputTokens: 12, OutputTokens: 3},
	}
	batch := []core.Event{
		core.NewEvent(core.EventModelResponse, resp),
		core.NewEvent(core.EventToolStarted, core.ToolStarted{ToolCallID: "call_1", Tool: "search", IdempotencyKey: r.ID + ":call_1"}),
		core.NewEvent(core.EventToolResult, core.ToolResult{ToolCallID: "call_1", Tool: "search", Content: "all green"}),
	}
	batch[0].CreatedAt = at(time.Second)
	got, err := h.Store.AppendEvents(ctx, r.ID, "w1", batch)
	if err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	wantSeqs(t, "first batch", r.ID, got, 3, 5)
	got, err = h.Store.AppendEvents(ctx, r.ID, "w1", []core.Event{
		core.NewEvent(core.EventModelResponse, core.ModelResponse{Text: "all green"}),
		statusEvent(core.RunCompleted),
	})
	if err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	wantSeqs(t, "second batch", r.ID, got, 6, 7)

	evs := journal(t, h, r.ID)
	wantSeqs(t, "journal", r.ID, evs, 1, 7)
	types := make([]core.EventType, len(evs))
	for i, e := range evs {
		types[i] = e.Type
	}
	wantTypes := []core.EventType{core.EventUserMessage, core.EventStatus, core.EventModelResponse, core.EventToolStarted,
		core.EventToolResult, core.EventModelResponse, core.EventStatus}
	if !slices.Equal(types, wantTypes) {
		t.Errorf("journal types = %v, want %v", types, wantTypes)
	}
	if p := payload[core.ModelResponse](t, evs[2]); !reflect.DeepEqual(p.Usage, resp.Usage) || len(p.ToolCalls) != 1 ||
		p.ToolCalls[0].ID != "call_1" {
		t.Errorf("model response = %+v, want %+v", p, resp)
	} else {
		sameJSON(t, "tool call arguments", p.ToolCalls[0].Arguments, resp.ToolCalls[0].Arguments)
	}
	sameTime(t, "event 3 created_at", evs[2].CreatedAt, at(time.Second))
	if r := getRun(t, h, r.ID); r.LastSeq != 7 {
		t.Errorf("last seq = %d, want 7", r.LastSeq)
	}

	page, err := h.Store.Events(ctx, r.ID, 3, 2)
	if err != nil {
		t.Fatalf("Events(after 3, limit 2): %v", err)
	}
	wantSeqs(t, "Events(after 3, limit 2)", r.ID, page, 4, 5)
	if tail, err := h.Store.Events(ctx, r.ID, 7, 0); err != nil || len(tail) != 0 {
		t.Errorf("Events(after the last) = %d events, %v; want none", len(tail), err)
	}

	// w2 takes over the expired claim: w1 must stop writing.
	if _, err := h.Store.ClaimRun(ctx, r.ID, "w2", at(lease), at(2*lease), nil); err != nil {
		t.Fatalf("ClaimRun takeover: %v", err)
	}
	_, err = h.Store.AppendEvents(ctx, r.ID, "w1", []core.Event{statusEvent(core.RunCompleted)})
	wantErr(t, "AppendEvents by the previous owner", err, core.ErrClaimLost)
	if n := len(journal(t, h, r.ID)); n != 7 {
		t.Errorf("journal has %d events after a refused append, want 7", n)
	}

	if _, err := h.Store.CancelRun(ctx, r.ID, core.Cancel{By: "u1", At: at(lease)}); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	_, err = h.Store.AppendEvents(ctx, r.ID, "w2", []core.Event{statusEvent(core.RunCompleted)})
	wantErr(t, "AppendEvents to a cancelled run", err, core.ErrRunFinished)
	wantErr(t, "ExtendClaim of a cancelled run", h.Store.ExtendClaim(ctx, r.ID, "w2", at(time.Hour)), core.ErrClaimLost)
}

func testPauseRun(t *testing.T, h Harness) {
	ctx := t.Context()
	r := createIn(t, h, t0)
	drainJobs(t, h)
	a := newApproval("call_1", at(15*time.Minute))
	a.CreatedAt = at(10 * time.Second)
	paused := pauseFor(t, h, r.ID, a)
	if paused.Status != core.RunPaused || paused.LastSeq != 3 {
		t.Errorf("PauseRun: status %s, last seq %d; want paused, 3", paused.Status, paused.LastSeq)
	}
	wantStatus(t, h, r.ID, core.RunPaused)

	got := getApproval(t, h, a.ID)
	if got.RunID != r.ID || got.SessionID != r.SessionID {
		t.Errorf("approval run/session = %s/%s, want %s/%s (filled from the run)", got.RunID, got.SessionID, r.ID, r.SessionID)
	}
	if got.Status != core.ApprovalPending || got.ToolCallID != "call_1" || got.Tool != "deploy" || got.Origin != "mcp:ops" ||
		got.ArgsSHA256 != a.ArgsSHA256 || got.RequestedBy != "u1" || got.DecidedBy != "" || got.DecidedAt != nil ||
		!reflect.DeepEqual(got.Policy, a.Policy) {
		t.Errorf("approval = %+v, want pending with the fields of %+v", got, a)
	}
	sameJSON(t, "approval arguments", got.Arguments, a.Arguments)
	sameTime(t, "approval created_at", got.CreatedAt, a.CreatedAt)
	sameTime(t, "approval expires_at", got.ExpiresAt, a.ExpiresAt)

	pending, err := h.Store.ListApprovals(ctx, core.ApprovalFilter{Status: core.ApprovalPending})
	if err != nil {
		t.Fatalf("ListApprovals: %v", err)
	}
	if len(pending.Items) != 1 || pending.Items[0].ID != a.ID {
		t.Errorf("pending approvals = %+v, want [%s]", pending.Items, a.ID)
	}
	evs := journal(t, h, r.ID)
	if last := evs[len(evs)-1]; last.Type != core.EventApprovalRequested ||
		payload[core.ApprovalRequested](t, last).ApprovalID != a.ID {
		t.Errorf("last event = %s %s, want approval_requested for %s", last.Type, last.Data, a.ID)
	}

	// The claim is released: the worker must let go, nobody may pick it up.
	_, err = h.Store.AppendEvents(ctx, r.ID, "w1", []core.Event{statusEvent(core.RunRunning)})
	wantErr(t, "AppendEvents to a paused run", err, core.ErrClaimLost)
	wantErr(t, "ExtendClaim of a paused run", h.Store.ExtendClaim(ctx, r.ID, "w1", at(time.Hour)), core.ErrClaimLost)
	_, err = h.Store.ClaimRun(ctx, r.ID, "w1", at(time.Minute), at(2*time.Minute), nil)
	wantErr(t, "ClaimRun of a paused run", err, core.ErrRunPaused)
	wantJobs(t, h)

	other := createIn(t, h, t0)
	claim(t, h, other.ID, "w1", t0)
	b := newApproval("call_2", at(time.Hour))
	_, err = h.Store.PauseRun(ctx, other.ID, "w2", b, nil)
	wantErr(t, "PauseRun by a node that does not hold the claim", err, core.ErrClaimLost)
	_, err = h.Store.GetApproval(ctx, b.ID)
	wantErr(t, "GetApproval of the refused pause", err, core.ErrNotFound)
	wantStatus(t, h, other.ID, core.RunRunning)
}

func testFinishRun(t *testing.T, h Harness) {
	ctx := t.Context()
	r := createIn(t, h, t0)
	claim(t, h, r.ID, "w1", t0)
	f := core.Finish{
		Status: core.RunCompleted, Output: "deployed", Usage: core.Usage{InputTokens: 120, OutputTokens: 30},
		At: at(time.Minute), Events: []core.Event{statusEvent(core.RunCompleted)},
	}
	_, err := h.Store.FinishRun(ctx, r.ID, "w2", f)
	wantErr(t, "FinishRun by a node that does not hold the claim", err, core.ErrClaimLost)
	wantStatus(t, h, r.ID, core.RunRunning)

	got, err := h.Store.FinishRun(ctx, r.ID, "w1", f)
	if err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	if got.Status != core.RunCompleted || got.Output != "deployed" || got.Usage != f.Usage || got.LastSeq != 3 {
		t.Errorf("finished run = %+v, want completed, output, usage and last seq 3", got)
	}
	sameTimePtr(t, "finished_at", got.FinishedAt, at(time.Minute))
	if stored := getRun(t, h, r.ID); stored.Status != core.RunCompleted || stored.Output != "deployed" || stored.Usage != f.Usage {
		t.Errorf("GetRun after finish = %+v", stored)
	}
	_, err = h.Store.FinishRun(ctx, r.ID, "w1", f)
	wantErr(t, "FinishRun of a finished run", err, core.ErrRunFinished)
	_, err = h.Store.AppendEvents(ctx, r.ID, "w1", []core.Event{statusEvent(core.RunRunning)})
	wantErr(t, "AppendEvents to a finished run", err, core.ErrRunFinished)

	// The dead-letter path fails a run nobody holds.
	dead := createIn(t, h, t0)
	got, err = h.Store.FinishRun(ctx, dead.ID, "", core.Finish{
		Status: core.RunFailed, Error: "job dead-lettered", At: at(time.Minute),
		Events: []core.Event{core.NewEvent(core.EventStatus, core.StatusChange{Status: core.RunFailed, Error: "job dead-lettered"})},
	})
	if err != nil {
		t.Fatalf("FinishRun without owner: %v", err)
	}
	if got.Status != core.RunFailed || got.Error != "job dead-lettered" || got.LastSeq != 2 {
		t.Errorf("failed run = %+v, want failed with its error and last seq 2", got)
	}
}

func testDecideApproval(t *testing.T, h Harness) {
	ctx := t.Context()
	r, a := pausedRun(t, h, at(time.Hour))
	drainJobs(t, h)

	d := core.Decision{
		Status: core.ApprovalApproved, By: "u-boss", Via: "slack", Reason: "looks good",
		ArgsSHA256: a.ArgsSHA256, At: at(time.Minute),
	}
	got, err := h.Store.DecideApproval(ctx, a.ID, d)
	if err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	if got.ID != a.ID || got.Status != core.ApprovalApproved || got.DecidedBy != "u-boss" || got.DecidedVia != "slack" ||
		got.Reason != "looks good" || got.RunID != r.ID {
		t.Errorf("decided approval = %+v, want approved by u-boss via slack", got)
	}
	sameTimePtr(t, "decided_at", got.DecidedAt, at(time.Minute))
	if stored := getApproval(t, h, a.ID); stored.Status != core.ApprovalApproved || stored.DecidedBy != "u-boss" {
		t.Errorf("GetApproval after decision = %+v", stored)
	}

	wantStatus(t, h, r.ID, core.RunQueued)
	wantJobs(t, h, r.ID)
	evs := journal(t, h, r.ID)
	wantSeqs(t, "journal", r.ID, evs, 1, r.LastSeq+1)
	last := evs[len(evs)-1]
	if last.Type != core.EventApprovalDecided {
		t.Fatalf("last event = %s, want approval_decided", last.Type)
	}
	want := core.ApprovalDecided{ApprovalID: a.ID, ToolCallID: a.ToolCallID, Status: core.ApprovalApproved,
		DecidedBy: "u-boss", Via: "slack", Reason: "looks good"}
	if p := payload[core.ApprovalDecided](t, last); p != want {
		t.Errorf("approval_decided = %+v, want %+v", p, want)
	}

	// The first decision wins.
	late, err := h.Store.DecideApproval(ctx, a.ID, core.Decision{Status: core.ApprovalDenied, By: "u-other", Via: "api", At: at(2 * time.Minute)})
	var np *core.NotPendingError
	if !errors.As(err, &np) {
		t.Fatalf("second DecideApproval: err = %v, want *core.NotPendingError", err)
	}
	if np.ID != a.ID || np.Status != core.ApprovalApproved {
		t.Errorf("NotPendingError = %+v, want id %s status approved", np, a.ID)
	}
	if late.ID != "" && late.Status != core.ApprovalApproved {
		t.Errorf("second DecideApproval returned %+v, want the approval as decided first", late)
	}
	if stored := getApproval(t, h, a.ID); stored.Status != core.ApprovalApproved || stored.DecidedBy != "u-boss" {
		t.Errorf("approval after a late decision = %+v, want the first decision", stored)
	}
	if n := len(journal(t, h, r.ID)); n != len(evs) {
		t.Errorf("journal has %d events after a late decision, want %d", n, len(evs))
	}
	wantJobs(t, h)

	// The run resumes.
	claim(t, h, r.ID, "w2", at(3*time.Minute))
}

func testDecideApprovalConcurrent(t *testing.T, h Harness) {
	r, a := pausedRun(t, h, at(time.Hour))
	const deciders = 10
	errs := make([]error, deciders)
	var wg sync.WaitGroup
	for i := range deciders {
		wg.Go(func() {
			s := core.ApprovalApproved
			if i%2 == 1 {
				s = core.ApprovalDenied
			}
			_, errs[i] = h.Store.DecideApproval(t.Context(), a.ID, core.Decision{
				Status: s, By: fmt.Sprint("u", i), Via: "slack", At: at(time.Minute),
			})
		})
	}
	wg.Wait()

	winner := -1
	for i, err := range errs {
		var np *core.NotPendingError
		switch {
		case err == nil && winner >= 0:
			t.Errorf("deciders %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.As(err, &np):
			t.Errorf("decider %d: err = %v, want *core.NotPendingError", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no decider won")
	}
	got := getApproval(t, h, a.ID)
	if got.DecidedBy != fmt.Sprint("u", winner) {
		t.Errorf("approval decided by %s, want the winner u%d", got.DecidedBy, winner)
	}
	for i, err := range errs {
		var np *core.NotPendingError
		if errors.As(err, &np) && np.Status != got.Status {
			t.Errorf("decider %d saw status %s, want the winner's %s", i, np.Status, got.Status)
		}
	}
	decided := 0
	for _, e := range journal(t, h, r.ID) {
		if e.Type == core.EventApprovalDecided {
			decided++
		}
	}
	if decided != 1 {
		t.Errorf("journal has %d approval_decided events, want 1", decided)
	}
	wantStatus(t, h, r.ID, core.RunQueued)
}

func testDecideApprovalArgsMismatch(t *testing.T, h Harness) {
	ctx := t.Context()
	r, a := pausedRun(t, h, at(time.Hour))
	drainJobs(t, h)

	_, err := h.Store.DecideApproval(ctx, a.ID, core.Decision{
		Status: core.ApprovalApproved, By: "u-boss", Via: "slack", ArgsSHA256: "sha-of-other-arguments", At: at(time.Minute),
	})
	wantErr(t, "DecideApproval for other arguments", err, core.ErrArgsMismatch)
	if got := getApproval(t, h, a.ID); got.Status != core.ApprovalPending {
		t.Errorf("approval status = %s, want pending", got.Status)
	}
	wantStatus(t, h, r.ID, core.RunPaused)
	if n := int64(len(journal(t, h, r.ID))); n != r.LastSeq {
		t.Errorf("journal has %d events, want %d", n, r.LastSeq)
	}
	wantJobs(t, h)

	if _, err := h.Store.DecideApproval(ctx, a.ID, core.Decision{
		Status: core.ApprovalDenied, By: "u-boss", Via: "slack", ArgsSHA256: a.ArgsSHA256, At: at(time.Minute),
	}); err != nil {
		t.Fatalf("DecideApproval with the right hash: %v", err)
	}
	wantStatus(t, h, r.ID, core.RunQueued)
	wantJobs(t, h, r.ID)
}

func testCancelRun(t *testing.T, h Harness) {
	ctx := t.Context()
	r, a := pausedRun(t, h, at(time.Hour))
	c := core.Cancel{By: "u-admin", Reason: "no longer needed", At: at(5 * time.Minute)}
	got, err := h.Store.CancelRun(ctx, r.ID, c)
	if err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	if got.Status != core.RunCancelled || got.LastSeq != r.LastSeq+2 {
		t.Errorf("cancelled run: status %s, last seq %d; want cancelled, %d", got.Status, got.LastSeq, r.LastSeq+2)
	}
	sameTimePtr(t, "finished_at", got.FinishedAt, c.At)

	ap := getApproval(t, h, a.ID)
	if ap.Status != core.ApprovalCancelled || ap.DecidedBy != "u-admin" || ap.Reason != "no longer needed" {
		t.Errorf("approval of the cancelled run = %+v, want cancelled by u-admin with the reason", ap)
	}
	sameTimePtr(t, "approval decided_at", ap.DecidedAt, c.At)

	evs := journal(t, h, r.ID)
	wantSeqs(t, "journal", r.ID, evs, 1, r.LastSeq+2)
	decided, status := evs[len(evs)-2], evs[len(evs)-1]
	if decided.Type != core.EventApprovalDecided {
		t.Errorf("second to last event = %s, want approval_decided", decided.Type)
	} else if p := payload[core.ApprovalDecided](t, decided); p.ApprovalID != a.ID || p.Status != core.ApprovalCancelled {
		t.Errorf("approval_decided = %+v, want %s cancelled", p, a.ID)
	}
	if status.Type != core.EventStatus {
		t.Errorf("last event = %s, want status", status.Type)
	} else if p := payload[core.StatusChange](t, status); p.Status != core.RunCancelled {
		t.Errorf("status event = %+v, want cancelled", p)
	}

	again, err := h.Store.CancelRun(ctx, r.ID, core.Cancel{By: "u-admin", At: at(6 * time.Minute)})
	wantErr(t, "second CancelRun", err, core.ErrRunFinished)
	if again.ID != r.ID || again.Status != core.RunCancelled {
		t.Errorf("second CancelRun returned %s %s, want the cancelled run", again.ID, again.Status)
	}
	_, err = h.Store.DecideApproval(ctx, a.ID, core.Decision{Status: core.ApprovalApproved, By: "u-boss", At: at(7 * time.Minute)})
	var np *core.NotPendingError
	if !errors.As(err, &np) || np.Status != core.ApprovalCancelled {
		t.Errorf("DecideApproval after cancel: err = %v, want *core.NotPendingError with status cancelled", err)
	}

	// A running run is cancelled under its worker's feet.
	running := createIn(t, h, t0)
	claim(t, h, running.ID, "w1", t0)
	if _, err := h.Store.CancelRun(ctx, running.ID, core.Cancel{By: "u1", At: at(time.Second)}); err != nil {
		t.Fatalf("CancelRun of a running run: %v", err)
	}
	_, err = h.Store.FinishRun(ctx, running.ID, "w1", core.Finish{Status: core.RunCompleted, At: at(2 * time.Second)})
	wantErr(t, "FinishRun of a cancelled run", err, core.ErrRunFinished)
	wantStatus(t, h, running.ID, core.RunCancelled)

	queued := createIn(t, h, t0)
	if _, err := h.Store.CancelRun(ctx, queued.ID, core.Cancel{At: at(time.Second)}); err != nil {
		t.Fatalf("CancelRun of a queued run: %v", err)
	}
	wantStatus(t, h, queued.ID, core.RunCancelled)
}

func testDueApprovals(t *testing.T, h Harness) {
	ctx := t.Context()
	_, a3 := pausedRun(t, h, at(3*time.Minute))
	r1, a1 := pausedRun(t, h, at(1*time.Minute))
	_, a2 := pausedRun(t, h, at(2*time.Minute))
	_, decided := pausedRun(t, h, at(1*time.Minute))
	decide(t, h, decided.ID, core.ApprovalApproved, "u-boss")

	ids := func(as []core.Approval) []string {
		out := make([]string, len(as))
		for i, a := range as {
			out[i] = a.ID
		}
		return out
	}
	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"nothing due yet", t0, 0, nil},
		{"due at their expiry", at(2 * time.Minute), 0, []string{a1.ID, a2.ID}},
		{"all pending, oldest expiry first", at(time.Hour), 0, []string{a1.ID, a2.ID, a3.ID}},
		{"limit", at(time.Hour), 2, []string{a1.ID, a2.ID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.Store.DueApprovals(ctx, tc.now, tc.limit)
			if err != nil {
				t.Fatalf("DueApprovals: %v", err)
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("DueApprovals(%v, %d) = %v, want %v", tc.now, tc.limit, ids(got), tc.want)
			}
		})
	}

	// The expiry timer decides them: they are no longer due.
	exp, err := h.Store.DecideApproval(ctx, a1.ID, core.Decision{Status: core.ApprovalExpired, Via: "timer", At: at(time.Hour)})
	if err != nil {
		t.Fatalf("DecideApproval(expired): %v", err)
	}
	if exp.Status != core.ApprovalExpired {
		t.Errorf("expired approval status = %s", exp.Status)
	}
	got, err := h.Store.DueApprovals(ctx, at(time.Hour), 0)
	if err != nil {
		t.Fatalf("DueApprovals: %v", err)
	}
	if want := []string{a2.ID, a3.ID}; !slices.Equal(ids(got), want) {
		t.Errorf("DueApprovals after expiring %s = %v, want %v", a1.ID, ids(got), want)
	}
	wantStatus(t, h, r1.ID, core.RunQueued)
}

// pageAll walks a list with cursors and returns the ids and page sizes.
func pageAll[T any](t *testing.T, what string, list func(cursor string) (core.Page[T], error), id func(T) string) ([]string, []int) {
	t.Helper()
	var ids []string
	var sizes []int
	cursor := ""
	for range 100 {
		p, err := list(cursor)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sizes = append(sizes, len(p.Items))
		for _, it := range p.Items {
			ids = append(ids, id(it))
		}
		if p.NextCursor == "" {
			return ids, sizes
		}
		cursor = p.NextCursor
	}
	t.Fatalf("%s: more than 100 pages", what)
	return nil, nil
}

func testPagination(t *testing.T, h Harness) {
	ctx := t.Context()
	empty, err := h.Store.ListApprovals(ctx, core.ApprovalFilter{})
	if err != nil || len(empty.Items) != 0 || empty.NextCursor != "" {
		t.Errorf("ListApprovals of an empty store = %+v, %v; want no items and no cursor", empty, err)
	}

	var sessions, runs, approvals, agentBSessions, userSessions, agentBApprovals []string
	for i := range 7 {
		agent, user := agentA, "u1"
		if i%2 == 1 {
			agent, user = agentB, "u2"
		}
		r := create(t, h, newRun(core.NewID("ses"), agent, user, "hi", at(time.Duration(i)*time.Second)))
		a := newApproval("call_1", at(time.Hour))
		pauseFor(t, h, r.ID, a)
		sessions, runs, approvals = append(sessions, r.SessionID), append(runs, r.ID), append(approvals, a.ID)
		if agent == agentB {
			agentBSessions = append(agentBSessions, r.SessionID)
			agentBApprovals = append(agentBApprovals, a.ID)
		}
		if user == "u1" {
			userSessions = append(userSessions, r.SessionID)
		}
	}
	// A second run in the first session stays queued.
	extra := create(t, h, newRun(sessions[0], agentA, "u1", "again", at(time.Minute)))
	for _, id := range approvals[:3] {
		decide(t, h, id, core.ApprovalDenied, "u-boss")
	}

	sessionID := func(s core.Session) string { return s.ID }
	runID := func(r core.Run) string { return r.ID }
	approvalID := func(a core.Approval) string { return a.ID }
	tests := []struct {
		name      string
		list      func(limit int) ([]string, []int)
		limit     int
		want      []string
		wantSizes []int
	}{
		{"sessions", func(limit int) ([]string, []int) {
			return pageAll(t, "ListSessions", func(c string) (core.Page[core.Session], error) {
				return h.Store.ListSessions(ctx, core.SessionFilter{ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, sessionID)
		}, 3, sessions, []int{3, 3, 1}},
		{"sessions of an agent", func(limit int) ([]string, []int) {
			return pageAll(t, "ListSessions", func(c string) (core.Page[core.Session], error) {
				return h.Store.ListSessions(ctx, core.SessionFilter{AgentID: agentB, ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, sessionID)
		}, 2, agentBSessions, []int{2, 1}},
		{"sessions of the agents a key may use", func(limit int) ([]string, []int) {
			return pageAll(t, "ListSessions", func(c string) (core.Page[core.Session], error) {
				return h.Store.ListSessions(ctx, core.SessionFilter{AgentIDs: []string{agentB, "nobody"},
					ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, sessionID)
		}, 2, agentBSessions, []int{2, 1}},
		{"sessions of a user", func(limit int) ([]string, []int) {
			return pageAll(t, "ListSessions", func(c string) (core.Page[core.Session], error) {
				return h.Store.ListSessions(ctx, core.SessionFilter{UserID: "u1", ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, sessionID)
		}, 2, userSessions, []int{2, 2}},
		{"runs", func(limit int) ([]string, []int) {
			return pageAll(t, "ListRuns", func(c string) (core.Page[core.Run], error) {
				return h.Store.ListRuns(ctx, core.RunFilter{ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, runID)
		}, 3, append(slices.Clone(runs), extra.ID), []int{3, 3, 2}},
		{"runs of a session", func(limit int) ([]string, []int) {
			return pageAll(t, "ListRuns", func(c string) (core.Page[core.Run], error) {
				return h.Store.ListRuns(ctx, core.RunFilter{SessionID: sessions[0], ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, runID)
		}, 1, []string{runs[0], extra.ID}, []int{1, 1}},
		{"runs by status", func(limit int) ([]string, []int) {
			return pageAll(t, "ListRuns", func(c string) (core.Page[core.Run], error) {
				return h.Store.ListRuns(ctx, core.RunFilter{Statuses: []core.RunStatus{core.RunPaused},
					ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, runID)
		}, 3, runs[3:], []int{3, 1}},
		{"runs by statuses", func(limit int) ([]string, []int) {
			return pageAll(t, "ListRuns", func(c string) (core.Page[core.Run], error) {
				return h.Store.ListRuns(ctx, core.RunFilter{Statuses: []core.RunStatus{core.RunQueued, core.RunCompleted},
					ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, runID)
		}, 2, append(slices.Clone(runs[:3]), extra.ID), []int{2, 2}},
		{"approvals", func(limit int) ([]string, []int) {
			return pageAll(t, "ListApprovals", func(c string) (core.Page[core.Approval], error) {
				return h.Store.ListApprovals(ctx, core.ApprovalFilter{ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, approvalID)
		}, 3, approvals, []int{3, 3, 1}},
		{"approvals by status", func(limit int) ([]string, []int) {
			return pageAll(t, "ListApprovals", func(c string) (core.Page[core.Approval], error) {
				return h.Store.ListApprovals(ctx, core.ApprovalFilter{Status: core.ApprovalPending,
					ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, approvalID)
		}, 2, approvals[3:], []int{2, 2}},
		{"approvals of a run", func(limit int) ([]string, []int) {
			return pageAll(t, "ListApprovals", func(c string) (core.Page[core.Approval], error) {
				return h.Store.ListApprovals(ctx, core.ApprovalFilter{RunID: runs[4], ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, approvalID)
		}, 0, approvals[4:5], []int{1}},
		{"approvals of the agents a key may use", func(limit int) ([]string, []int) {
			return pageAll(t, "ListApprovals", func(c string) (core.Page[core.Approval], error) {
				return h.Store.ListApprovals(ctx, core.ApprovalFilter{AgentIDs: []string{agentB},
					ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
			}, approvalID)
		}, 2, agentBApprovals, []int{2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ids, sizes := tc.list(tc.limit)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("items = %v, want %v (creation order)", ids, tc.want)
			}
			if !slices.Equal(sizes, tc.wantSizes) {
				t.Errorf("page sizes = %v, want %v (the last page has no next cursor)", sizes, tc.wantSizes)
			}
		})
	}
}

// testApprovalsOfAConversation: a chat command lists what was asked in its
// own channel, whatever else is pending on the gateway.
func testApprovalsOfAConversation(t *testing.T, h Harness) {
	ctx := t.Context()
	bindings := []core.Binding{
		{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1.1"},
		{Platform: "slack", Workspace: "T2", Channel: "C1"}, // another workspace's C1
		{Platform: "telegram", Channel: "C1"},               // another platform
		{Platform: "slack", Workspace: "T1", Channel: "C2"},
		{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "2.2"},
		{}, // an API run
	}
	var ids []string
	for i, b := range bindings {
		nr := newRun(core.NewID("ses"), agentA, "u1", "hi", at(time.Duration(i)*time.Second))
		nr.Session.Binding = b
		r := create(t, h, nr)
		a := newApproval("call_1", at(time.Hour))
		pauseFor(t, h, r.ID, a)
		ids = append(ids, a.ID)
	}
	tests := []struct {
		name string
		b    core.Binding
		want []string
	}{
		{"a channel's threads", core.Binding{Platform: "slack", Workspace: "T1", Channel: "C1"}, []string{ids[0], ids[4]}},
		{"a workspace not known", core.Binding{Platform: "slack", Channel: "C1"}, []string{ids[0], ids[1], ids[4]}},
		{"a Telegram chat", core.Binding{Platform: "telegram", Channel: "C1"}, []string{ids[2]}},
		{"an empty channel", core.Binding{Platform: "discord", Channel: "D9"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := pageAll(t, "ListApprovals", func(c string) (core.Page[core.Approval], error) {
				return h.Store.ListApprovals(ctx, core.ApprovalFilter{Status: core.ApprovalPending, Conversation: &tc.b,
					ListOptions: core.ListOptions{Limit: 1, Cursor: c}})
			}, func(a core.Approval) string { return a.ID })
			if !slices.Equal(got, tc.want) {
				t.Errorf("approvals of %+v = %v, want %v", tc.b, got, tc.want)
			}
		})
	}
}

// testStartRun: the engine's one call to start a step claims the session's
// head only, appends the status event once (when the run starts), and
// returns the journal and the session's history with the claim.
func testStartRun(t *testing.T, h Harness) {
	ctx := t.Context()
	sid := core.NewID("ses")
	first := create(t, h, newRun(sid, agentA, "u1", "first", at(0)))
	second := create(t, h, newRun(sid, agentA, "u1", "second", at(time.Second)))
	start := func(id, owner string, now time.Time, history int) (core.Started, error) {
		return h.Store.StartRun(ctx, core.Start{ID: id, Owner: owner, Now: now, Until: now.Add(lease),
			Events: []core.Event{statusEvent(core.RunRunning)}, History: history})
	}
	if _, err := start(second.ID, "w1", at(time.Minute), 5); !errors.Is(err, core.ErrNotHead) {
		t.Fatalf("StartRun of the second run while the first is queued: %v, want ErrNotHead", err)
	}
	if r, _ := h.Store.GetRun(ctx, second.ID); r.Status != core.RunQueued || r.LastSeq != 1 {
		t.Fatalf("the second run after a refused start: %s, last seq %d; want queued, 1", r.Status, r.LastSeq)
	}
	got, err := start(first.ID, "w1", at(time.Minute), 5)
	if err != nil {
		t.Fatalf("StartRun of the head: %v", err)
	}
	if !got.Began || got.Run.Status != core.RunRunning || got.Run.LastSeq != 2 || len(got.Journal) != 2 ||
		got.Journal[0].Type != core.EventUserMessage || got.Journal[1].Type != core.EventStatus || got.Journal[1].Seq != 2 ||
		len(got.History) != 0 {
		t.Fatalf("started = began %t, %s, last seq %d, journal %+v, history %d; want began, running, 2, message + status, none",
			got.Began, got.Run.Status, got.Run.LastSeq, got.Journal, len(got.History))
	}
	// The same owner again (a retried job): no second status event.
	again, err := start(first.ID, "w1", at(2*time.Minute), 5)
	if err != nil || again.Began || again.Run.LastSeq != 2 || len(again.Journal) != 2 {
		t.Fatalf("restart by its owner = began %t, last seq %d, %d events, %v; want not began, 2, 2", again.Began,
			again.Run.LastSeq, len(again.Journal), err)
	}
	if _, err := start(first.ID, "w2", at(2*time.Minute), 0); !errors.Is(err, core.ErrClaimed) {
		t.Fatalf("StartRun by another node while claimed: %v, want ErrClaimed", err)
	}
	finish(t, h, first.ID, "w1", core.RunCompleted, at(3*time.Minute))
	if _, err := start(first.ID, "w1", at(4*time.Minute), 0); !errors.Is(err, core.ErrRunFinished) {
		t.Fatalf("StartRun of a finished run: %v, want ErrRunFinished", err)
	}
	next, err := start(second.ID, "w2", at(4*time.Minute), 5)
	if err != nil || !next.Began || len(next.History) != 1 || next.History[0].ID != first.ID || next.History[0].Output != "output of "+first.ID {
		t.Fatalf("StartRun of the next run = %+v, %v; want it started with the first run as history", next, err)
	}
	if none, err := start(second.ID, "w2", at(4*time.Minute), 0); err != nil || none.History != nil {
		t.Fatalf("StartRun without history = %d runs, %v; want none", len(none.History), err)
	}
	if _, err := start("run_nope", "w1", at(time.Minute), 0); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("StartRun of an unknown run: %v, want ErrNotFound", err)
	}
	paused := createIn(t, h, at(0))
	pauseFor(t, h, paused.ID, newApproval("call_1", at(time.Hour)))
	if _, err := start(paused.ID, "w1", at(time.Minute), 0); !errors.Is(err, core.ErrRunPaused) {
		t.Fatalf("StartRun of a paused run: %v, want ErrRunPaused", err)
	}
}

func testDefaultPageSize(t *testing.T, h Harness) {
	sid := core.NewID("ses")
	for i := range 51 {
		create(t, h, newRun(sid, agentA, "u1", "hi", at(time.Duration(i)*time.Second)))
	}
	for _, limit := range []int{0, 1000} {
		ids, sizes := pageAll(t, "ListRuns", func(c string) (core.Page[core.Run], error) {
			return h.Store.ListRuns(t.Context(), core.RunFilter{ListOptions: core.ListOptions{Limit: limit, Cursor: c}})
		}, func(r core.Run) string { return r.ID })
		if len(ids) != 51 {
			t.Errorf("limit %d: %d runs in all, want 51", limit, len(ids))
		}
		want := []int{50, 1} // default page size
		if limit > 0 {
			want = []int{51} // capped at 500
		}
		if !slices.Equal(sizes, want) {
			t.Errorf("limit %d: page sizes = %v, want %v", limit, sizes, want)
		}
	}
}

func testRequeueActive(t *testing.T, h Harness) {
	ctx := t.Context()
	n, err := h.Store.RequeueActive(ctx)
	if err != nil || n != 0 {
		t.Errorf("RequeueActive of an empty store = %d, %v; want 0", n, err)
	}
	queued := createIn(t, h, t0)
	running := createIn(t, h, t0)
	claim(t, h, running.ID, "w1", t0)
	pausedRun(t, h, at(time.Hour))
	done := createIn(t, h, t0)
	claim(t, h, done.ID, "w1", t0)
	finish(t, h, done.ID, "w1", core.RunCompleted, at(time.Second))
	cancelled := createIn(t, h, t0)
	if _, err := h.Store.CancelRun(ctx, cancelled.ID, core.Cancel{At: t0}); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	drainJobs(t, h)

	for range 2 {
		n, err := h.Store.RequeueActive(ctx)
		if err != nil {
			t.Fatalf("RequeueActive: %v", err)
		}
		if n != 2 {
			t.Errorf("RequeueActive = %d, want 2 (the queued and the running run)", n)
		}
	}
	wantJobs(t, h, queued.ID, running.ID) // once each: the job key coalesces
}

func testCounts(t *testing.T, h Harness) {
	ctx := t.Context()
	wantCounts := func(what string, runs map[core.RunStatus]int64, approvals map[core.ApprovalStatus]int64) {
		t.Helper()
		gotRuns, err := h.Store.CountRuns(ctx)
		if err != nil {
			t.Fatalf("CountRuns: %v", err)
		}
		for _, s := range []core.RunStatus{core.RunQueued, core.RunRunning, core.RunPaused, core.RunCompleted, core.RunFailed, core.RunCancelled} {
			if gotRuns[s] != runs[s] {
				t.Errorf("%s: %s runs = %d, want %d", what, s, gotRuns[s], runs[s])
			}
		}
		gotApprovals, err := h.Store.CountApprovals(ctx)
		if err != nil {
			t.Fatalf("CountApprovals: %v", err)
		}
		for _, s := range []core.ApprovalStatus{core.ApprovalPending, core.ApprovalApproved, core.ApprovalDenied, core.ApprovalExpired, core.ApprovalCancelled} {
			if gotApprovals[s] != approvals[s] {
				t.Errorf("%s: %s approvals = %d, want %d", what, s, gotApprovals[s], approvals[s])
			}
		}
	}
	wantCounts("empty store", nil, nil)

	createIn(t, h, t0)                           // queued
	claim(t, h, createIn(t, h, t0).ID, "w1", t0) // running
	pausedRun(t, h, at(time.Hour))               // paused, approval pending
	_, approved := pausedRun(t, h, at(time.Hour))
	decide(t, h, approved.ID, core.ApprovalApproved, "u-boss") // queued again
	_, denied := pausedRun(t, h, at(time.Hour))
	decide(t, h, denied.ID, core.ApprovalDenied, "u-boss") // queued again
	cancelled, _ := pausedRun(t, h, at(time.Hour))
	if _, err := h.Store.CancelRun(ctx, cancelled.ID, core.Cancel{At: at(time.Minute)}); err != nil {
		t.Fatalf("CancelRun: %v", err) // approval cancelled
	}
	for _, st := range []core.RunStatus{core.RunCompleted, core.RunCompleted, core.RunFailed} {
		r := createIn(t, h, t0)
		claim(t, h, r.ID, "w1", t0)
		finish(t, h, r.ID, "w1", st, at(time.Second))
	}

	wantCounts("after activity",
		map[core.RunStatus]int64{core.RunQueued: 3, core.RunRunning: 1, core.RunPaused: 1, core.RunCompleted: 2, core.RunFailed: 1, core.RunCancelled: 1},
		map[core.ApprovalStatus]int64{core.ApprovalPending: 1, core.ApprovalApproved: 1, core.ApprovalDenied: 1, core.ApprovalCancelled: 1})
}

func testDedupe(t *testing.T, h Harness) {
	nr := newRun("ses-d", "A", "u1", "hello", at(0))
	nr.Platform, nr.DedupeKey = "slack", "msg:C1:1.0001"
	first := create(t, h, nr)

	again := newRun("ses-d2", "A", "u1", "hello", at(time.Second))
	again.Platform, again.DedupeKey = "slack", "msg:C1:1.0001"
	_, err := h.Store.CreateRun(t.Context(), again)
	wantErr(t, "CreateRun of a duplicate", err, core.ErrDuplicate)
	var dup *core.DuplicateError
	if !errors.As(err, &dup) || dup.RunID != first.ID {
		t.Fatalf("duplicate error = %v, want one naming run %s", err, first.ID)
	}
	if _, err := h.Store.GetRun(t.Context(), again.Run.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("the duplicate's run exists: %v", err)
	}
	if _, err := h.Store.GetSession(t.Context(), "ses-d2"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("the duplicate's session exists: %v", err)
	}
	wantJobs(t, h, first.ID)

	// The same key on another platform, and no key at all, are not duplicates.
	other := newRun("ses-d3", "A", "u1", "hello", at(2*time.Second))
	other.Platform, other.DedupeKey = "discord", "msg:C1:1.0001"
	plain := newRun("ses-d4", "A", "u1", "hello", at(3*time.Second))
	r3, r4 := create(t, h, other), create(t, h, plain)
	wantJobs(t, h, r3.ID, r4.ID)
}

func testDedupeConcurrent(t *testing.T, h Harness) {
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			nr := newRun(fmt.Sprintf("ses-c%d", i), "A", "u1", "hello", at(0))
			nr.Platform, nr.DedupeKey = "slack", "msg:C1:2.0002"
			_, errs[i] = h.Store.CreateRun(t.Context(), nr)
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, core.ErrDuplicate):
			t.Errorf("CreateRun: %v, want nil or ErrDuplicate", err)
		}
	}
	if created != 1 {
		t.Fatalf("%d concurrent duplicates created %d runs, want 1", n, created)
	}
	if c, err := h.Store.CountRuns(t.Context()); err != nil || c[core.RunQueued] != 1 {
		t.Errorf("runs = %v, %v; want 1 queued", c, err)
	}
}

func testOutbox(t *testing.T, h Harness) {
	ob, ok := h.Store.(core.Outbox)
	if !ok {
		t.Skip("store has no outbox")
	}
	ctx := t.Context()
	claim := func(key string, want bool, wantState string) {
		t.Helper()
		got, state, err := ob.ClaimSend(ctx, key, at(0))
		if err != nil || got != want || state != wantState {
			t.Fatalf("ClaimSend(%s) = %v, %q, %v; want %v, %q", key, got, state, err, want, wantState)
		}
	}
	claim("k1", true, core.SendSending)
	claim("k1", false, core.SendSending) // an earlier attempt's outcome is unknown
	if err := ob.SetSendState(ctx, "k1", core.SendSent, "1.0001", at(time.Second)); err != nil {
		t.Fatal(err)
	}
	claim("k1", false, core.SendSent)

	claim("k2", true, core.SendSending)
	if err := ob.SetSendState(ctx, "k2", core.SendFailed, "", at(time.Second)); err != nil {
		t.Fatal(err)
	}
	claim("k2", true, core.SendSending) // nothing was sent: claimable again
	wantErr(t, "SetSendState of an unknown key", ob.SetSendState(ctx, "nope", core.SendSent, "", at(0)), core.ErrNotFound)

	if state, ref, err := ob.SendRef(ctx, "k1"); err != nil || state != core.SendSent || ref != "1.0001" {
		t.Errorf("SendRef(k1) = %q, %q, %v; want sent, 1.0001", state, ref, err)
	}
	if state, ref, err := ob.SendRef(ctx, "k2"); err != nil || state != core.SendSending || ref != "" {
		t.Errorf("SendRef(k2) = %q, %q, %v; want sending, no ref", state, ref, err)
	}
	_, _, err := ob.SendRef(ctx, "nope")
	wantErr(t, "SendRef of an unknown key", err, core.ErrNotFound)

	// A job that found k1 sending while another posted it marks it
	// uncertain only while it is still sending: the other's outcome (a
	// card's ref, which clicks are checked against) stays.
	if err := ob.SetSendState(ctx, "k1", core.SendUncertain, "", at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if state, ref, err := ob.SendRef(ctx, "k1"); err != nil || state != core.SendSent || ref != "1.0001" {
		t.Errorf("SendRef(k1) after a late uncertain = %q, %q, %v; want sent, 1.0001 kept", state, ref, err)
	}
	if err := ob.SetSendState(ctx, "k2", core.SendUncertain, "", at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if state, _, err := ob.SendRef(ctx, "k2"); err != nil || state != core.SendUncertain {
		t.Errorf("SendRef(k2) after uncertain = %q, %v; want uncertain", state, err)
	}
	wantErr(t, "SetSendState uncertain of an unknown key", ob.SetSendState(ctx, "nope", core.SendUncertain, "", at(0)), core.ErrNotFound)

	// A claim whose answer was lost is given back by its time (to the
	// nanosecond the caller had: the store may keep less); another claim
	// of the key, or an outcome, stays.
	claimedAt := at(3 * time.Second).Add(1234567 * time.Nanosecond)
	if ok, _, err := ob.ClaimSend(ctx, "k3", claimedAt); err != nil || !ok {
		t.Fatalf("ClaimSend(k3) = %v, %v", ok, err)
	}
	for _, other := range []time.Time{claimedAt.Add(time.Millisecond), claimedAt.Add(-time.Second)} {
		if err := ob.ReleaseSend(ctx, "k3", other); err != nil {
			t.Fatal(err)
		}
	}
	if err := ob.ReleaseSend(ctx, "k1", at(0)); err != nil {
		t.Fatal(err)
	}
	if state, _, err := ob.SendRef(ctx, "k3"); err != nil || state != core.SendSending {
		t.Errorf("SendRef(k3) after releasing another claim = %q, %v; want sending", state, err)
	}
	if state, ref, err := ob.SendRef(ctx, "k1"); err != nil || state != core.SendSent || ref != "1.0001" {
		t.Errorf("SendRef(k1) after a release = %q, %q, %v; want sent, 1.0001 kept", state, ref, err)
	}
	if err := ob.ReleaseSend(ctx, "k3", claimedAt); err != nil {
		t.Fatal(err)
	}
	claim("k3", true, core.SendSending) // given back: claimable again
	if err := ob.ReleaseSend(ctx, "nope", at(0)); err != nil {
		t.Errorf("ReleaseSend of an unknown key: %v, want nothing done", err)
	}
}

// testApprovalJobs: every change of an approval (created, decided, cancelled
// with its run, cancelled by a failed finish) enqueues a JobApproval in the
// same transaction, so chat cards always follow the approval.
func testApprovalJobs(t *testing.T, h Harness) {
	ctx := t.Context()
	_, a := pausedRun(t, h, at(time.Hour))
	wantApprovalJobs(t, h, a.ID+":pending")
	decide(t, h, a.ID, core.ApprovalApproved, "u-boss")
	wantApprovalJobs(t, h, a.ID+":approved")
	// A refused decision changes nothing and announces nothing.
	if _, err := h.Store.DecideApproval(ctx, a.ID, core.Decision{Status: core.ApprovalDenied, By: "u-boss", At: at(time.Minute)}); err == nil {
		t.Fatal("second decision accepted")
	}
	wantApprovalJobs(t, h)

	r2, a2 := pausedRun(t, h, at(time.Hour))
	drainAll(t, h)
	if _, err := h.Store.CancelRun(ctx, r2.ID, core.Cancel{By: "u1", Reason: "not needed", At: at(time.Minute)}); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	wantApprovalJobs(t, h, a2.ID+":cancelled")

	// A run failed while paused (the dead-letter path) cancels its approval.
	r3, a3 := pausedRun(t, h, at(time.Hour))
	drainAll(t, h)
	if _, err := h.Store.FinishRun(ctx, r3.ID, "", core.Finish{Status: core.RunFailed, Error: "gave up", At: at(time.Minute)}); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	wantApprovalJobs(t, h, a3.ID+":cancelled")
}

// A store that is also the queue acks the finished step's job in the
// finishing transaction; a job whose lease was lost meanwhile stays.
func testFinishRunAcksItsJob(t *testing.T, h Harness) {
	if any(h.Store) != any(h.Queue) {
		t.Skip("the queue is not the store: the engine acks separately")
	}
	ctx := t.Context()
	finish := func(id string, ack *core.Job) {
		t.Helper()
		claim(t, h, id, "w1", t0)
		if _, err := h.Store.FinishRun(ctx, id, "w1", core.Finish{Status: core.RunCompleted, At: at(time.Minute),
			Events: []core.Event{statusEvent(core.RunCompleted)}, Ack: ack}); err != nil {
			t.Fatalf("FinishRun with its job: %v", err)
		}
	}
	r := createIn(t, h, t0)
	j, ok, err := h.Queue.TryDequeue(ctx, "storetest", time.Minute)
	if err != nil || !ok {
		t.Fatalf("TryDequeue: %v, %t", err, ok)
	}
	finish(r.ID, &j)
	wantErr(t, "Ack of a job the finish acked", h.Queue.Ack(ctx, j), core.ErrLeaseLost)
	if d, err := h.Queue.Depth(ctx); err != nil || d != 0 {
		t.Errorf("depth after a finish that acked its job = %d, %v; want 0", d, err)
	}

	other := createIn(t, h, t0)
	j, ok, err = h.Queue.TryDequeue(ctx, "storetest", time.Minute)
	if err != nil || !ok {
		t.Fatalf("TryDequeue: %v, %t", err, ok)
	}
	stale := j
	stale.Lease = "a-lease-since-lost"
	finish(other.ID, &stale)
	if d, err := h.Queue.Depth(ctx); err != nil || d != 1 {
		t.Errorf("depth after a finish with a lost lease = %d, %v; want 1 (the job stays with its holder)", d, err)
	}
	if err := h.Queue.Ack(ctx, j); err != nil {
		t.Errorf("the holder's Ack after the finish: %v", err)
	}
}
