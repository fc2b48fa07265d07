package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready {
			http.Error(w, "store: connection refused", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"health", "--url", srv.URL}, strings.NewReader(""), &out, &out); err != nil || out.String() != "ready\n" {
		t.Fatalf("health of a ready gateway: %v, %q", err, out.String())
	}
	ready = false
	err := run(t.Context(), []string{"health", "--url", srv.URL}, strings.NewReader(""), &out, &out)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "not ready (503): store: connection refused") {
		t.Fatalf("health of a gateway not ready: %v", err)
	}
	for addr, want := range map[string]string{"0.0.0.0:8080": "127.0.0.1:8080", "[::]:9": "127.0.0.1:9", ":7": "127.0.0.1:7", "10.0.0.5:80": "10.0.0.5:80"} {
		if got := localAddr(addr); got != want {
			t.Errorf("localAddr(%q) = %q, want %q", addr, got, want)
		}
	}
}
