package routine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/agentgate/agentgate/core"
)

// JobResult is the job kind that handles a finished routine run: it records
// the outcome against the failure budget and delivers the result. The engine
// enqueues it in the transaction that finishes the run (see OnFinish).
const JobResult = "routine_result"

// resultJob is the payload of a JobResult job.
type resultJob struct {
	RoutineID string `json:"routine_id"`
	RunID     string `json:"run_id"`
}

// WebhookPayload is the JSON body POSTed to a webhook: webhook:<url>. It is
// sent with `Idempotency-Key: <run_id>` (the same on every retry), or
// `<run_id>:disabled` for the notice that the run disabled the routine
// (Status "disabled", Error the reason).
type WebhookPayload struct {
	RoutineID string `json:"routine_id"`
	RunID     string `json:"run_id"`
	// Status is the run's (completed or failed), or disabled for the notice.
	Status  string        `json:"status"`
	Output  string        `json:"output"`
	Error   string        `json:"error"`
	FiredAt time.Time     `json:"fired_at"`
	Kind    core.FireKind `json:"kind,omitempty"`
	DueAt   *time.Time    `json:"due_at,omitempty"`
}

// OnFinish is the engine's finish hook (core.EngineConfig.OnFinish): a
// routine run gets a JobResult job, committed with its final status.
func (s *Scheduler) OnFinish(run core.Run, status core.RunStatus) []core.Job {
	if run.RoutineID == "" {
		return nil
	}
	p, _ := json.Marshal(resultJob{RoutineID: run.RoutineID, RunID: run.ID}) // strings always marshal
	return []core.Job{{Kind: JobResult, Key: JobResult + ":" + run.ID, Payload: p, MaxAttempts: s.cfg.DeliveryAttempts}}
}

// Handlers returns the engine job handlers of routines
// (core.EngineConfig.Handlers).
func (s *Scheduler) Handlers() map[string]func(context.Context, core.Job) error {
	return map[string]func(context.Context, core.Job) error{JobResult: s.HandleResult}
}

// HandleResult handles a JobResult job. It is safe to run more than once for
// a run: the outcome is counted once, and a webhook sees the same
// Idempotency-Key on every attempt. An error retries the job.
func (s *Scheduler) HandleResult(ctx context.Context, job core.Job) error {
	var p resultJob
	if err := json.Unmarshal(job.Payload, &p); err != nil {
		return fmt.Errorf("routine result job %s: %w", job.ID, err)
	}
	run, err := s.cfg.Runs.GetRun(ctx, p.RunID)
	if err != nil {
		return err
	}
	if !run.Status.Terminal() {
		return fmt.Errorf("routine run %s is %s, not finished", run.ID, run.Status)
	}
	r, err := s.cfg.Store.GetRoutine(ctx, p.RoutineID)
	if errors.Is(err, core.ErrNotFound) {
		s.log.Warn("routine result: routine no longer exists; not delivered", "routine", p.RoutineID, "run", run.ID)
		return ignoreNotFound(s.cfg.Store.SetRoutineDelivery(ctx, run.ID, "not delivered: the routine no longer exists"))
	}
	if err != nil {
		return err
	}
	reason := fmt.Sprintf("disabled after %d consecutive failed runs; fix the cause, then enable it again", r.MaxFailures)
	entry, err := s.cfg.Store.SettleRoutineRun(ctx, core.RoutineSettle{
		RunID: run.ID, Status: run.Status, At: s.cfg.Clock.Now().UTC(), DisableReason: reason,
	})
	switch {
	case errors.Is(err, core.ErrNotFound):
		// A routine run made outside FireRoutine: no history entry to count on.
		entry = core.RoutineEntry{RoutineID: r.ID, Kind: core.FireManual, FiredAt: run.CreatedAt, RunID: run.ID}
	case err != nil:
		return err
	}
	if entry.DisabledRoutine {
		s.log.Warn("routine disabled itself", "routine", r.ID, "run", run.ID, "max_failures", r.MaxFailures)
	}
	target, err := ParseTarget(r.DeliverTo)
	if err != nil {
		return ignoreNotFound(s.cfg.Store.SetRoutineDelivery(ctx, run.ID, "failed: deliver_to: "+err.Error()))
	}
	var state string
	switch {
	case target.Kind == TargetNone:
		state = "none"
	case target.Chat():
		state = "pending: " + target.Kind + " delivery arrives with the chat interfaces"
	case target.Kind == TargetWebhook:
		msg := WebhookPayload{RoutineID: r.ID, RunID: run.ID, Status: string(run.Status), Output: run.Output,
			Error: run.Error, FiredAt: entry.FiredAt, Kind: entry.Kind, DueAt: entry.DueAt}
		err := s.post(ctx, target.Dest, run.ID, msg)
		if err == nil && entry.DisabledRoutine {
			msg.Status, msg.Output, msg.Error = "disabled", "", reason
			err = s.post(ctx, target.Dest, run.ID+":disabled", msg)
		}
		if err != nil {
			state = fmt.Sprintf("retrying (attempt %d of %d): %v", job.Attempt, job.MaxAttempts, err)
			if job.MaxAttempts > 0 && job.Attempt >= job.MaxAttempts {
				state = fmt.Sprintf("failed after %d attempts: %v", job.Attempt, err)
			}
			if serr := s.cfg.Store.SetRoutineDelivery(ctx, run.ID, state); serr != nil && !errors.Is(serr, core.ErrNotFound) {
				s.log.Warn("routine delivery state", "run", run.ID, "err", serr)
			}
			return err
		}
		state = "delivered"
	}
	return ignoreNotFound(s.cfg.Store.SetRoutineDelivery(ctx, run.ID, state))
}

func ignoreNotFound(err error) error {
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	return err
}

// post sends one webhook delivery. Errors name the host only: webhook URLs
// often carry a secret.
func (s *Scheduler) post(ctx context.Context, dest, key string, msg WebhookPayload) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	u, err := url.Parse(dest)
	if err != nil {
		return errors.New("webhook: invalid URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", u.Host, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("User-Agent", "agentgate")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook %s answered %s", u.Host, resp.Status)
	}
	return nil
}
