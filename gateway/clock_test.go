package gateway

import (
	"strings"
	"testing"
	"time"
)

// A host whose clock is off the database's by more than a sixth of the
// claim TTL does not serve: its claims would be judged against another
// replica's clock, and runs taken over while still running.
func TestClockSkewRefused(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rtt := 40 * time.Millisecond
	for _, tt := range []struct {
		name  string
		dbNow time.Time
		ttl   time.Duration
		want  string
	}{
		{"in step", t0.Add(rtt / 2), 30 * time.Second, ""},
		{"4s behind", t0.Add(rtt/2 + 4*time.Second), 30 * time.Second, ""},
		{"6s behind", t0.Add(rtt/2 + 6*time.Second), 30 * time.Second, "this host's clock is -6s off the database's (more than 5s)"},
		{"6s ahead", t0.Add(rtt/2 - 6*time.Second), 30 * time.Second, "this host's clock is 6s off the database's (more than 5s)"},
		{"6s ahead, a longer TTL", t0.Add(rtt/2 - 6*time.Second), 60 * time.Second, ""},
		// A slow read: what it leaves unknown is not held against the host.
		{"5.01s off, read in 40ms", t0.Add(rtt/2 + 5010*time.Millisecond), 30 * time.Second, ""},
	} {
		err := clockSkewError(t0, tt.dbNow, t0.Add(rtt), tt.ttl)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want none", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
