package chat

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentgate/agentgate/core"
)

// replyJob is the payload of a platform's reply job.
type replyJob struct {
	RunID string `json:"run_id"`
}

// ReplyJobs is a platform replier's finish hook (core.EngineConfig.OnFinish)
// for job kind: every chat run gets a reply job, committed with its end, so
// no answer is lost to a crash; the handler skips runs of other platforms
// (ReplyTarget).
func ReplyJobs(kind string, run core.Run) []core.Job {
	if run.Type != core.RunTypeChat {
		return nil
	}
	p, _ := json.Marshal(replyJob{RunID: run.ID}) // strings always marshal
	return []core.Job{{Kind: kind, Key: kind + ":" + run.ID, Payload: p}}
}

// RunSessions reads runs and sessions; core.Store is one.
type RunSessions interface {
	GetRun(ctx context.Context, id string) (core.Run, error)
	GetSession(ctx context.Context, id string) (core.Session, error)
}

// ReplyTarget reads the finished run of a reply job (ReplyJobs) and the
// conversation it answers in; ok is false when that is not a conversation
// of platform.
func ReplyTarget(ctx context.Context, st RunSessions, job core.Job, platform string) (run core.Run, b core.Binding, ok bool, err error) {
	var p replyJob
	if err := json.Unmarshal(job.Payload, &p); err != nil {
		return run, b, false, fmt.Errorf("%s reply job %s: %w", platform, job.ID, err)
	}
	if run, err = st.GetRun(ctx, p.RunID); err != nil {
		return run, b, false, err
	}
	if !run.Status.Terminal() {
		return run, b, false, fmt.Errorf("%s reply: run %s is %s, not finished", platform, run.ID, run.Status)
	}
	sess, err := st.GetSession(ctx, run.SessionID)
	if err != nil {
		return run, b, false, err
	}
	b = sess.Binding
	return run, b, b.Platform == platform && b.Channel != "", nil
}

// EventReader reads a run's journal; core.Store is one.
type EventReader interface {
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]core.Event, error)
}

// Segment is the number of approvals the run has asked for so far. A live
// answer shows one message per segment: what the run says after a decision
// comes below the approval card, not in the message above it.
func Segment(ctx context.Context, st EventReader, runID string) (int, error) {
	evs, err := st.Events(ctx, runID, 0, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == core.EventApprovalRequested {
			n++
		}
	}
	return n, nil
}
