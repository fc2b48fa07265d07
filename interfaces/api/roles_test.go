package api_test

import (
	"testing"

	"github.com/agentgate/agentgate/core"
)

const (
	adminKey    = "admin-key-0123456789"
	viewerKey   = "viewer-key-0123456789"
	operatorKey = "operator-key-0123456789"
	approverKey = "approver-key-0123456789"
)

// Each key does what its role allows and no more; a refusal is 403 with an
// audit entry, and who decided is always the key, whatever the body says.
func TestKeyRoles(t *testing.T) {
	e := newEnv(t, adminKey, viewerKey, operatorKey, approverKey) // named k0..k3
	as := func(key string) *env { c := *e; c.key = key; return &c }

	var run runResp
	if code := as(viewerKey).call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"deploy web to staging"}`, nil); code != 403 {
		t.Fatalf("viewer starting a run: %d, want 403", code)
	}
	if code := as(operatorKey).call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"deploy web to staging","user_id":"ana"}`, &run); code != 200 || len(run.PendingApprovals) != 1 {
		t.Fatalf("operator starting a run: %d %+v", code, run)
	}
	if run.StartedBy != "key:k2" || run.UserID != "ana" {
		t.Fatalf("run started by %q for %q, want key:k2 for ana", run.StartedBy, run.UserID)
	}
	a := run.PendingApprovals[0]
	var list core.Page[core.Approval]
	if code := as(viewerKey).call("GET", "/api/v1/approvals?status=pending", "", &list); code != 200 || len(list.Items) != 1 {
		t.Fatalf("viewer listing approvals: %d %+v", code, list)
	}
	for _, key := range []string{viewerKey, operatorKey} {
		var er errResp
		if code := as(key).call("POST", "/api/v1/approvals/"+a.ID+"/decision", `{"decision":"approve"}`, &er); code != 403 {
			t.Fatalf("%s deciding: %d %+v, want 403", key, code, er)
		}
	}
	var er errResp
	if code := as(approverKey).call("POST", "/api/v1/runs/"+run.ID+"/cancel", `{}`, &er); code != 403 {
		t.Fatalf("approver cancelling a run it did not start: %d, want 403", code)
	}
	var decided core.Approval
	if code := as(approverKey).call("POST", "/api/v1/approvals/"+a.ID+"/decision",
		`{"decision":"approve","decided_by":"U_APPROVER","via":"slack"}`, &decided); code != 200 {
		t.Fatalf("approver deciding: %d", code)
	}
	if decided.DecidedBy != "key:k3" || decided.DecidedVia != "api" {
		t.Fatalf("decided by %q via %q, want key:k3 via api (the body's decided_by and via are ignored)", decided.DecidedBy, decided.DecidedVia)
	}
	if code := as(approverKey).call("GET", "/api/v1/audit", "", nil); code != 403 {
		t.Fatalf("approver reading the audit log: %d, want 403", code)
	}
	as(viewerKey).call("GET", "/api/v1/agents", "", nil)
	e.key = "not-a-key-0123456789"
	e.call("GET", "/api/v1/agents", "", nil)
	var log core.Page[core.AuditEntry]
	if code := as(adminKey).call("GET", "/api/v1/audit", "", &log); code != 200 {
		t.Fatalf("admin reading the audit log: %d", code)
	}
	want := map[string]bool{}
	for _, x := range log.Items {
		want[x.Action+" "+x.Principal] = true
	}
	for _, w := range []string{"role.refused key:k1", "role.refused key:k2", "approval.approve key:k3",
		"role.refused key:k3", "key.refused "} {
		if !want[w] {
			t.Errorf("audit has no %q entry: %+v", w, log.Items)
		}
	}
	var byAction core.Page[core.AuditEntry]
	as(adminKey).call("GET", "/api/v1/audit?action=approval.approve&target="+a.ID, "", &byAction)
	if len(byAction.Items) != 1 || byAction.Items[0].Principal != "key:k3" {
		t.Fatalf("audit filtered by action and target: %+v", byAction.Items)
	}
}
