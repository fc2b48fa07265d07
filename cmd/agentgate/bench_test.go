package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchCommand checks the dispatch to internal/bench: both benches are
// reachable, their flag mistakes exit with code 2 and --help is no error.
// The benches themselves are tested in internal/bench.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int    // 0 = no error
		wantErr  string // in the error
		wantHelp string // on stderr
	}{
		{"replicas need PostgreSQL and Redis", []string{"bench", "--replicas", "2"}, 2, "--database-url and --redis-url", ""},
		{"unknown flag", []string{"bench", "--bogus"}, 2, "-bogus", "Usage: agentgate bench [flags]"},
		{"slack-ingest flag mistake", []string{"bench", "slack-ingest", "--clients", "0"}, 2, "--clients", ""},
		// Valid flags, but this is a test binary: bench must not start it as a server.
		{"no server binary in tests", []string{"bench", "--quick"}, 2, "give --server-bin", ""},
		{"help", []string{"bench", "--help"}, 0, "", "Usage: agentgate bench [flags]"},
		{"slack-ingest help", []string{"bench", "slack-ingest", "--help"}, 0, "", "Usage: agentgate bench slack-ingest [flags]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			err := run(t.Context(), tt.args, nil, &bytes.Buffer{}, &stderr)
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Errorf("%q = %v, want no error", tt.args, err)
			case tt.wantCode != 0 && (err == nil || exitCode(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("%q = %v, want an error with exit code %d mentioning %q", tt.args, err, tt.wantCode, tt.wantErr)
			}
			if !strings.Contains(stderr.String(), tt.wantHelp) {
				t.Errorf("%q: stderr lacks %q:\n%s", tt.args, tt.wantHelp, stderr.String())
			}
		})
	}
}
