package config

import (
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Retention says how long the store keeps what is finished (retention:).
// Each age is a duration like 720h; 0s keeps forever; unset takes the
// default. What is due is removed oldest first, in batches of Batch, one
// short write transaction each, by the replica holding the retention lease,
// every Every. Live work (runs queued, running or waiting for approval,
// messages not yet processed, jobs not dead) is never removed.
type Retention struct {
	// Runs: finished runs (completed, failed, cancelled), their journals,
	// approvals and routine history, and the sessions left without runs.
	// Default 0: kept forever.
	Runs *time.Duration `yaml:"runs"`
	// Inbox: chat messages processed (their text and dedupe keys).
	// Default 168h (7 days).
	Inbox *time.Duration `yaml:"inbox"`
	// Outbox: records of chat posts made (they keep a retry from posting
	// twice). Default 168h.
	Outbox *time.Duration `yaml:"outbox"`
	// DeadJobs: dead-lettered jobs (agentgate jobs list). Default 0: kept
	// until retried.
	DeadJobs *time.Duration `yaml:"dead_jobs"`
	// Audit: the audit log. Default 0: kept forever.
	Audit *time.Duration `yaml:"audit"`
	// Blobs: files people sent and tools returned that no journal entry
	// names any more (their runs were pruned, or the message never became
	// a run), last stored this long ago; 0s keeps them, else at least
	// MinRetentionBlobs. Default DefaultRetentionBlobs when Runs is set,
	// else 0.
	Blobs *time.Duration `yaml:"blobs"`
	// Every is how often retention looks for what is due. Default 10m.
	Every time.Duration `yaml:"every"`
	// Batch is how many items one transaction removes, 1 to 10000.
	// Default 100.
	Batch int `yaml:"batch"`
}

// Retention defaults.
const (
	DefaultRetentionInbox  = 7 * 24 * time.Hour
	DefaultRetentionOutbox = 7 * 24 * time.Hour
	DefaultRetentionEvery  = 10 * time.Minute
	DefaultRetentionBatch  = 100
	MaxRetentionBatch      = 10000
	DefaultRetentionBlobs  = 24 * time.Hour
	// MinRetentionBlobs is the least age of a blob retention removes: a
	// file is stored before the message that names it is journaled (a
	// retried message stores it again), so a younger one may be on its way.
	MinRetentionBlobs = time.Hour
)

// Keep returns how long each kind is kept, defaults applied (0: forever).
func (r Retention) Keep() map[core.Prunable]time.Duration {
	get := func(d *time.Duration, def time.Duration) time.Duration {
		if d == nil {
			return def
		}
		return *d
	}
	runs := get(r.Runs, 0)
	blobs := time.Duration(0)
	if runs > 0 {
		blobs = DefaultRetentionBlobs // what the runs named goes with them
	}
	return map[core.Prunable]time.Duration{
		core.PruneRuns:     runs,
		core.PruneInbox:    get(r.Inbox, DefaultRetentionInbox),
		core.PruneOutbox:   get(r.Outbox, DefaultRetentionOutbox),
		core.PruneDeadJobs: get(r.DeadJobs, 0),
		core.PruneAudit:    get(r.Audit, 0),
		core.PruneBlobs:    get(r.Blobs, blobs),
	}
}

func (c *Config) validateRetention() []string {
	var p []string
	r := c.Retention
	for i, d := range []*time.Duration{r.Runs, r.Inbox, r.Outbox, r.DeadJobs, r.Audit, r.Blobs} {
		if what := core.Prunables[i]; d != nil && *d < 0 {
			p = append(p, fmt.Sprintf("retention.%s: must be a duration like 720h, or 0s to keep forever; got %s", what, *d))
		}
	}
	if r.Blobs != nil && *r.Blobs > 0 && *r.Blobs < MinRetentionBlobs {
		p = append(p, fmt.Sprintf("retention.blobs: must be %s or more (a file is stored before the message naming it is journaled), or 0s to keep files; got %s",
			MinRetentionBlobs, *r.Blobs))
	}
	if r.Every < 0 || (r.Every > 0 && r.Every < time.Second) {
		p = append(p, fmt.Sprintf("retention.every: must be 1s or more (default 10m), got %s", r.Every))
	}
	if r.Batch < 0 || r.Batch > MaxRetentionBatch {
		p = append(p, fmt.Sprintf("retention.batch: must be 1 to %d (default %d), got %d", MaxRetentionBatch, DefaultRetentionBatch, r.Batch))
	}
	return p
}
