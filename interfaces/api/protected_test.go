package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/interfaces/api"
)

// Protected routes want an API key, like /api/, and learn its name.
func TestProtectedRoutesKnowTheCaller(t *testing.T) {
	const key = "protected-key-0123456789"
	h := api.New(api.Config{Keys: []api.Key{{Name: "ci", Secret: key, Role: approval.RoleOperator}}, Protected: map[string]http.Handler{
		"/mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, _ := api.PrincipalFrom(r.Context())
			io.WriteString(w, p.ID+" "+p.Role.String())
		}),
	}})
	for _, tc := range []struct {
		auth   string
		status int
		body   string
	}{
		{"", http.StatusUnauthorized, ""},
		{"Bearer not-the-key-0123456789", http.StatusUnauthorized, ""},
		{"Bearer " + key, http.StatusOK, "key:ci operator"},
	} {
		req := httptest.NewRequest("POST", "/mcp", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || tc.body != "" && rec.Body.String() != tc.body {
			t.Errorf("%q: %d %q, want %d %q", tc.auth, rec.Code, rec.Body.String(), tc.status, tc.body)
		}
	}
	if got := api.KeyName(key); len(got) != len("env-")+8 || got == api.KeyName("other-key-0123456789") {
		t.Errorf("KeyName = %q", got)
	}
}
