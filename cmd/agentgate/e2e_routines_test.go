package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

// webhook records routine deliveries.
type webhook struct {
	mu   sync.Mutex
	keys map[string]int // Idempotency-Key → deliveries
	body []string
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.keys[r.Header.Get("Idempotency-Key")]++
	w.body = append(w.body, string(b))
	w.mu.Unlock()
	rw.WriteHeader(http.StatusNoContent)
}

func (w *webhook) deliveries() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.keys))
	for k, v := range w.keys {
		out[k] = v
	}
	return out
}

type entryJSON struct {
	Kind      string     `json:"kind"`
	DueAt     *time.Time `json:"due_at"`
	RunID     string     `json:"run_id"`
	RunStatus string     `json:"run_status"`
}

// TestE2ERoutineFiresOnceAcrossTwoReplicas runs an @every 2s routine on two
// replicas sharing PostgreSQL and Redis for a minute: every due time fires
// one run, and the webhook receives each run's output once.
func TestE2ERoutineFiresOnceAcrossTwoReplicas(t *testing.T) {
	dbURL, redisURL := os.Getenv("AGENTGATE_TEST_DATABASE_URL"), os.Getenv("AGENTGATE_TEST_REDIS_URL")
	if dbURL == "" || redisURL == "" {
		t.Skip("AGENTGATE_TEST_DATABASE_URL and AGENTGATE_TEST_REDIS_URL are needed for the two-replica routine test")
	}
	if testing.Short() {
		t.Skip("takes a minute")
	}
	t.Parallel()
	schema := strings.ToLower(strings.ReplaceAll(core.NewID("agt_e2e"), "-", "_"))
	t.Cleanup(func() {
		ctx := context.Background() // t.Context() has ended by cleanup time
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	_, modelURL := startModel(t, func(r fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Reply{Text: "digest for " + r.LastUserText()}
	})
	hook := &webhook{keys: map[string]int{}}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	cfg := writeFile(t, "routines.yaml", fmt.Sprintf(`
agents:
  ops:
    model: {provider: openai, name: fake, base_url: "${OPENAI_BASE_URL}"}
routines:
  tick:
    agent: ops
    schedule: "@every 2s"
    input: Summarize.
    deliver_to: webhook:%s/hook
    missed: skip
`, hookSrv.URL))
	env := func(node string) []string {
		return []string{"OPENAI_BASE_URL=" + modelURL, "AGENTGATE_DATABASE_URL=" + dbURL,
			"AGENTGATE_DATABASE_SCHEMA=" + schema, "AGENTGATE_REDIS_URL=" + redisURL,
			"AGENTGATE_REDIS_PREFIX=" + schema, "AGENTGATE_NODE_ID=" + node}
	}
	a := startGateway(t, gatewayOptions{config: cfg, env: env("a")})
	b := startGateway(t, gatewayOptions{config: cfg, env: env("b")})

	history := func() []entryJSON {
		var page struct {
			Items      []entryJSON `json:"items"`
			NextCursor string      `json:"next_cursor"`
		}
		var all []entryJSON
		for cursor := ""; ; cursor = page.NextCursor {
			page.NextCursor = ""
			b.json("GET", "/api/v1/routines/tick/runs?limit=500&cursor="+cursor, nil, http.StatusOK, &page)
			all = append(all, page.Items...)
			if page.NextCursor == "" {
				return all
			}
		}
	}
	// The scenario is a minute of schedule; the wait is its length, not a
	// synchronisation.
	time.Sleep(time.Minute)
	a.json("POST", "/api/v1/routines/tick/disable", nil, http.StatusOK, nil)

	var entries []entryJSON
	eventually(t, "every fired run completed and was delivered", func() (bool, string) {
		entries = history()
		runs, done := 0, 0
		for _, e := range entries {
			if e.RunID != "" {
				runs++
				if e.RunStatus == "completed" {
					done++
				}
			}
		}
		got := hook.deliveries()
		return runs > 0 && done == runs && len(got) >= runs, fmt.Sprintf("%d runs, %d completed, %d delivered", runs, done, len(got))
	})
	due := map[time.Time]int{}
	runs := map[string]bool{}
	held := 0 // due times that found the run before still going (a slow machine): missed, not queued behind it
	for _, e := range entries {
		if e.RunID == "" {
			if e.Kind == "missed" && e.DueAt != nil {
				held++
				due[e.DueAt.UTC()]++
			}
			continue
		}
		runs[e.RunID] = true
		if e.DueAt != nil {
			due[e.DueAt.UTC()]++
		}
	}
	for at, n := range due {
		if n != 1 {
			t.Errorf("due time %s fired or was held %d times, want 1", at.Format(time.RFC3339), n)
		}
	}
	got := hook.deliveries()
	for id := range runs {
		if got[id] != 1 {
			t.Errorf("run %s delivered %d times, want once", id, got[id])
		}
	}
	if len(got) != len(runs) {
		t.Errorf("webhook got %d distinct keys for %d runs", len(got), len(runs))
	}
	// 30 due times in a minute; the first and last may straddle the window.
	if n := len(runs) + held; n < 25 || n > 32 {
		t.Errorf("%d runs and %d held in a minute of @every 2s, want about 30 due times", len(runs), held)
	}
	t.Logf("two replicas, one minute of @every 2s: %d runs and %d held for %d due times, %d webhook deliveries", len(runs), held, len(due), len(got))
}
