package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
)

func TestRetentionDefaultsAndOverrides(t *testing.T) {
	c, err := config.Parse([]byte(`agents: {ops: {model: {provider: demo}}}`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	keep := c.Retention.Keep()
	if keep[core.PruneRuns] != 0 || keep[core.PruneDeadJobs] != 0 || keep[core.PruneAudit] != 0 || keep[core.PruneBlobs] != 0 ||
		keep[core.PruneInbox] != 7*24*time.Hour || keep[core.PruneOutbox] != 7*24*time.Hour {
		t.Errorf("default retention %v: want runs, dead letters, audit and files kept, inbox and outbox 7 days", keep)
	}

	c, err = config.Parse([]byte(`
agents: {ops: {model: {provider: demo}}}
retention: {runs: 720h, inbox: 0s, dead_jobs: 48h, every: 1m, batch: 50}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	keep = c.Retention.Keep()
	if keep[core.PruneRuns] != 720*time.Hour || keep[core.PruneInbox] != 0 || keep[core.PruneDeadJobs] != 48*time.Hour ||
		keep[core.PruneOutbox] != 7*24*time.Hour || c.Retention.Every != time.Minute || c.Retention.Batch != 50 {
		t.Errorf("retention %v every %s batch %d: not what the file says", keep, c.Retention.Every, c.Retention.Batch)
	}
	if keep[core.PruneBlobs] != 24*time.Hour {
		t.Errorf("files no journal names, with runs pruned: kept %s, want 24h by default", keep[core.PruneBlobs])
	}
	for yaml, want := range map[string]time.Duration{`{runs: 720h, blobs: 0s}`: 0, `{blobs: 2h}`: 2 * time.Hour} {
		c, err = config.Parse([]byte("agents: {ops: {model: {provider: demo}}}\nretention: "+yaml), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Retention.Keep()[core.PruneBlobs]; got != want {
			t.Errorf("retention %s: files kept %s, want %s", yaml, got, want)
		}
	}

	_, err = config.Parse([]byte(`
agents: {ops: {model: {provider: demo}}}
retention: {runs: -1h, every: 10ms, batch: 20000, blobs: 10m}
`), env(nil))
	for _, want := range []string{"retention.runs: must be a duration like 720h, or 0s to keep forever",
		"retention.every: must be 1s or more", "retention.batch: must be 1 to 10000",
		"retention.blobs: must be 1h0m0s or more (a file is stored before the message naming it is journaled), or 0s to keep files; got 10m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad retention: %v, want %q", err, want)
		}
	}
	_, err = config.Parse([]byte(`
agents: {ops: {model: {provider: demo}}}
retention: {runs: 30d}
`), env(nil))
	if want := "retention.runs: want a duration like 30s, 15m or 2h"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("retention in days: %v, want %q", err, want)
	}
}
