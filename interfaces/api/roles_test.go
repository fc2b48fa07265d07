package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/api"
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
	// A filter on the approval finds the role refusals of its decision too.
	var onIt core.Page[core.AuditEntry]
	as(adminKey).call("GET", "/api/v1/audit?action=role.refused&target="+a.ID, "", &onIt)
	if len(onIt.Items) != 2 || !strings.HasPrefix(onIt.Items[0].Detail, "POST /api/v1/approvals/"+a.ID+"/decision: ") {
		t.Fatalf("role refusals of the decision, by target: %+v, want the viewer's and the operator's", onIt.Items)
	}
	var byAction core.Page[core.AuditEntry]
	as(adminKey).call("GET", "/api/v1/audit?action=approval.approve&target="+a.ID, "", &byAction)
	if len(byAction.Items) != 1 || byAction.Items[0].Principal != "key:k3" {
		t.Fatalf("audit filtered by action and target: %+v", byAction.Items)
	}
}

// A key limited to some agents pages through their sessions and approvals
// only: full pages of its own, and nothing (no cursor either) of others'.
func TestKeyLimitedToAgentsPagesThroughItsOwn(t *testing.T) {
	const demoOnly, billingOnly = "demo-only-key-0123456789", "billing-only-key-0123456789"
	e := newEnvWith(t, func(c *api.Config) {
		c.Keys = append(c.Keys,
			api.Key{Name: "demo-ci", Secret: demoOnly, Role: approval.RoleViewer, Agents: []string{"demo"}},
			api.Key{Name: "billing-ci", Secret: billingOnly, Role: approval.RoleViewer, Agents: []string{"billing"}})
	}, adminKey)
	as := func(key string) *env { c := *e; c.key = key; return &c }
	var runs []string
	for range 3 {
		var run runResp
		if code := e.call("POST", "/api/v1/agents/demo/runs?wait=true", `{"input":"deploy web to staging"}`, &run); code != 200 || len(run.PendingApprovals) != 1 {
			t.Fatalf("starting a run: %d %+v", code, run)
		}
		runs = append(runs, run.ID)
	}
	pages := func(key, path string) (n int, pages int) {
		cursor := ""
		for range 10 {
			var p core.Page[json.RawMessage]
			if code := as(key).call("GET", path+"?limit=1&cursor="+cursor, "", &p); code != 200 {
				t.Fatalf("%s as %s: %d", path, key, code)
			}
			n, pages = n+len(p.Items), pages+1
			if cursor = p.NextCursor; cursor == "" {
				return n, pages
			}
		}
		t.Fatalf("%s as %s: more than 10 pages", path, key)
		return 0, 0
	}
	for _, path := range []string{"/api/v1/sessions", "/api/v1/approvals"} {
		if n, p := pages(demoOnly, path); n != 3 || p != 3 {
			t.Errorf("%s as the demo key: %d items on %d pages, want 3 on 3", path, n, p)
		}
		if n, p := pages(billingOnly, path); n != 0 || p != 1 {
			t.Errorf("%s as the billing key: %d items on %d pages, want one empty page", path, n, p)
		}
	}
	if code := as(billingOnly).call("GET", "/api/v1/runs/"+runs[0], "", nil); code != 403 {
		t.Errorf("the billing key reading a demo run: %d, want 403", code)
	}
}
