package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepositoryComposeFile checks the docker-compose.yaml users start.
func TestRepositoryComposeFile(t *testing.T) {
	t.Setenv("AGENTGATE_API_KEYS", testKey)
	var out bytes.Buffer
	if err := run(t.Context(), "../../docker-compose.yaml", &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"agentgate-1", "agentgate-2", "postgres", "redis"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output %q does not list service %s", out.String(), s)
		}
	}
}

// testKey is the gateways' key the tests start the file with.
const testKey = "compose-test-key-0123456789abcdef"

// The file has no default key: up without AGENTGATE_API_KEYS stops, saying
// how to make one.
func TestComposeFileNeedsAKey(t *testing.T) {
	t.Setenv("AGENTGATE_API_KEYS", "")
	err := run(t.Context(), "../../docker-compose.yaml", new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "set AGENTGATE_API_KEYS") || !strings.Contains(err.Error(), "openssl rand") {
		t.Fatalf("err = %v, want one asking for AGENTGATE_API_KEYS", err)
	}
}

// TestRefused: each file breaks one thing the scale-out needs, and the
// error names it.
func TestRefused(t *testing.T) {
	t.Setenv("AGENTGATE_API_KEYS", testKey)
	base, err := os.ReadFile("../../docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, old, new, want string
	}{
		{"not compose", "services:", "servicez:", "servicez"},
		{"public port", `"127.0.0.1:8081:8080"`, `"8081:8080"`, "agentgate-2: port 8081 published"},
		{"no health check", `test: ["CMD", "/agentgate", "health"]`, `disable: true`, "agentgate-1: no health check"},
		{"started before the database answers", "condition: service_healthy\n    redis:", "condition: service_started\n    redis:", "depends on postgres without condition: service_healthy"},
		{"one node id", "AGENTGATE_NODE_ID: gw-2", "AGENTGATE_NODE_ID: gw-1", "share AGENTGATE_NODE_ID gw-1"},
		{"redis unwatched", `test: ["CMD", "redis-cli", "ping"]`, `disable: true`, "names service redis, which has no health check"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !bytes.Contains(base, []byte(c.old)) {
				t.Fatalf("docker-compose.yaml no longer holds %q", c.old)
			}
			file := filepath.Join(t.TempDir(), "docker-compose.yaml")
			if err := os.WriteFile(file, bytes.Replace(base, []byte(c.old), []byte(c.new), 1), 0o600); err != nil {
				t.Fatal(err)
			}
			err := run(t.Context(), file, new(bytes.Buffer))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
