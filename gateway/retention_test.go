package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/gateway"
)

// With retention.runs set, a finished run is gone from the API once it is
// older than that (a live gateway prunes it on its own), and /metrics
// counts it.
func TestRetentionPrunesFinishedRuns(t *testing.T) {
	t.Parallel()
	s := settings(t)
	if err := os.WriteFile(s.ConfigPath, []byte(demoConfig+"retention: {runs: 1s, every: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(t.Context(), s, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- g.Start(ctx) }()
	defer func() { cancel(); <-served }() // it logs until it returns

	client := &http.Client{Timeout: 30 * time.Second}
	base := "http://" + g.Addr() + "/api/v1"
	resp, err := client.Post(base+"/agents/demo/runs?wait=true", "application/json", strings.NewReader(`{"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	var run struct{ ID, Status, SessionID string }
	err = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if err != nil || run.Status != "completed" {
		t.Fatalf("run: %+v, %v", run, err)
	}
	status := func(path string) int {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for status("/runs/"+run.ID) != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("a run finished with retention.runs 1s is still there 30s later")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := status("/runs/" + run.ID + "/events"); got != http.StatusNotFound {
		t.Errorf("GET the pruned run's events: %d, want 404", got)
	}
	// The counter follows the batch's commit, which the 404 above can see
	// first.
	metrics := func() string {
		resp, err := client.Get("http://" + g.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		if _, err := io.Copy(&b, resp.Body); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for m := metrics(); !strings.Contains(m, `agentgate_pruned_total{what="runs"} 1`); m = metrics() {
		if time.Now().After(deadline) {
			t.Fatalf("/metrics does not count the pruned run:\n%s", grepLines(m, "pruned"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
