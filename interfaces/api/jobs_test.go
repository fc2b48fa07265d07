package api_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
	"github.com/agentgate/agentgate/store/sqlite"
)

// A chat reply that failed every attempt (the platform was down) is listed
// as a dead letter and, once retried by an admin, due again — audited. No
// other role may see or retry it.
func TestDeadLetterJobsListedAndRetried(t *testing.T) {
	q, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "queue.sqlite"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := t.Context()
	if err := q.Enqueue(ctx, core.Job{Kind: "chat.reply", Payload: []byte(`{"run_id":"run_1"}`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	j, err := q.Dequeue(ctx, "test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if dead, err := q.Fail(ctx, j, "slack: 503 service unavailable", 0); err != nil || !dead {
		t.Fatalf("Fail = %v, %v; want the job dead-lettered", dead, err)
	}

	const admin, viewer, operator, approver = "admin-key-0123456789", "viewer-key-0123456789", "operator-key-012345678", "approver-key-01234567"
	const limitedAdmin = "ops-admin-key-0123456789"
	e := newEnvWith(t, func(c *api.Config) {
		c.Jobs = q
		c.Keys = append(c.Keys, api.Key{Name: "ops-admin", Secret: limitedAdmin, Role: approval.RoleAdmin, Agents: []string{"ops"}})
	}, admin, viewer, operator, approver)

	// The audit log and the jobs span every agent: an admin key limited to
	// some agents reads and retries none of them.
	e.key = limitedAdmin
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/jobs?status=dead"}, {"POST", "/api/v1/jobs/" + j.ID + "/retry"}, {"GET", "/api/v1/audit"},
	} {
		if code := e.call(c.method, c.path, "", nil); code != http.StatusForbidden {
			t.Errorf("%s %s with an admin key limited to one agent: %d, want 403", c.method, c.path, code)
		}
	}

	for _, k := range []string{viewer, operator, approver} {
		e.key = k
		if code := e.call("GET", "/api/v1/jobs?status=dead", "", nil); code != http.StatusForbidden {
			t.Errorf("list with a key below admin: %d, want 403", code)
		}
		if code := e.call("POST", "/api/v1/jobs/"+j.ID+"/retry", "", nil); code != http.StatusForbidden {
			t.Errorf("retry with a key below admin: %d, want 403", code)
		}
	}
	e.key = ""
	if code := e.call("GET", "/api/v1/jobs?status=dead", "", nil); code != http.StatusUnauthorized {
		t.Errorf("list without a key: %d, want 401", code)
	}

	e.key = admin
	var bad errResp
	if code := e.call("GET", "/api/v1/jobs?status=pending", "", &bad); code != http.StatusBadRequest || bad.Error.Message == "" {
		t.Errorf("status=pending: %d %+v, want 400 saying to give status=dead", code, bad)
	}
	var page core.Page[core.Job]
	if code := e.call("GET", "/api/v1/jobs?status=dead", "", &page); code != http.StatusOK || len(page.Items) != 1 ||
		page.Items[0].ID != j.ID || page.Items[0].Kind != "chat.reply" || page.Items[0].LastError != "slack: 503 service unavailable" {
		t.Fatalf("dead letters: %d %+v", code, page)
	}
	var retried core.Job
	if code := e.call("POST", "/api/v1/jobs/"+j.ID+"/retry", "", &retried); code != http.StatusOK || retried.ID != j.ID {
		t.Fatalf("retry: %d %+v", code, retried)
	}
	if code := e.call("POST", "/api/v1/jobs/"+j.ID+"/retry", "", nil); code != http.StatusNotFound {
		t.Errorf("retry of a job no longer dead: %d, want 404", code)
	}
	if code := e.call("GET", "/api/v1/jobs?status=dead", "", &page); code != http.StatusOK || len(page.Items) != 0 {
		t.Fatalf("dead letters after the retry: %d %+v", code, page)
	}
	again, err := q.Dequeue(ctx, "test", time.Minute)
	if err != nil || again.ID != j.ID || again.Attempt != 1 {
		t.Fatalf("the retried job is not due: %+v, %v", again, err)
	}
	var audit core.Page[core.AuditEntry]
	e.call("GET", "/api/v1/audit?action=job.retry", "", &audit)
	if len(audit.Items) != 1 || audit.Items[0].Target != j.ID || audit.Items[0].Principal != "key:k0" {
		t.Errorf("audit = %+v, want the retry by key:k0", audit.Items)
	}
}
