package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentgate/agentgate/interfaces/api"
)

// Protected routes want an API key, like /api/, and learn its name.
func TestProtectedRoutesKnowTheCaller(t *testing.T) {
	const key = "protected-key-0123456789"
	h := api.New(api.Config{Keys: []string{key}, Protected: map[string]http.Handler{
		"/mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, api.Caller(r.Context())) }),
	}})
	for _, tc := range []struct {
		auth   string
		status int
		body   string
	}{
		{"", http.StatusUnauthorized, ""},
		{"Bearer not-the-key-0123456789", http.StatusUnauthorized, ""},
		{"Bearer " + key, http.StatusOK, api.KeyName(key)},
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
	if got := api.KeyName(key); len(got) != len("key-")+8 || got == api.KeyName("other-key-0123456789") {
		t.Errorf("KeyName = %q", got)
	}
}
