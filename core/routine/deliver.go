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
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/egress"
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
	if run.CreatedAt.Before(r.CreatedAt) {
		// The routine was deleted and made anew under its id since this
		// run fired: its output is not the new routine's to deliver (to
		// another target, perhaps another team's), nor its failure to count.
		s.log.Warn("routine result: the routine was made anew since the run; not delivered", "routine", p.RoutineID, "run", run.ID)
		return ignoreNotFound(s.cfg.Store.SetRoutineDelivery(ctx, run.ID, "not delivered: the routine was deleted, and made anew, since this run"))
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
	targets, err := s.targets(ctx, r, run)
	if err != nil {
		return err
	}
	var states []string
	var failed error
	for _, t := range targets {
		state, err := s.deliver(ctx, t, r, run, entry, reason, job)
		states = append(states, state)
		failed = errors.Join(failed, err)
	}
	if failed != nil {
		if serr := s.cfg.Store.SetRoutineDelivery(ctx, run.ID, strings.Join(states, "; ")); serr != nil && !errors.Is(serr, core.ErrNotFound) {
			s.log.Warn("routine delivery state", "run", run.ID, "err", serr)
		}
		return failed
	}
	return ignoreNotFound(s.cfg.Store.SetRoutineDelivery(ctx, run.ID, strings.Join(states, "; ")))
}

// destination is one place a result goes: a parsed deliver_to, or the chat
// conversation a run was asked from (Binding set).
type destination struct {
	Target
	Binding core.Binding
	Err     error // deliver_to did not parse
}

// targets lists where run's result goes: the conversation it was asked from
// (TriggerIn) alone, else the routine's deliver_to. A run asked for in chat
// carries its asker's extra input: posted to deliver_to as well, a caller
// of one conversation would write (as the routine) into another.
func (s *Scheduler) targets(ctx context.Context, r core.Routine, run core.Run) ([]destination, error) {
	if s.cfg.Sessions != nil {
		sess, err := s.cfg.Sessions.GetSession(ctx, run.SessionID)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return nil, err
		}
		if b := sess.Binding; b.Platform != "" && b.Channel != "" {
			return []destination{{Target: Target{Kind: b.Platform, Dest: b.Channel}, Binding: b}}, nil
		}
	}
	t, err := ParseTarget(r.DeliverTo)
	if err != nil {
		return []destination{{Err: err}}, nil
	}
	return []destination{{Target: t, Binding: core.Binding{Platform: t.Kind, Channel: t.Dest}}}, nil
}

// deliver sends run's result to one destination and says what happened.
func (s *Scheduler) deliver(ctx context.Context, d destination, r core.Routine, run core.Run, entry core.RoutineEntry, reason string, job core.Job) (string, error) {
	var err error
	switch {
	case d.Err != nil:
		return "failed: deliver_to: " + d.Err.Error(), nil
	case d.Kind == TargetNone:
		return "none", nil
	case d.Chat():
		c, ok := s.cfg.Chat[d.Kind]
		if !ok {
			return "not delivered: the " + d.Kind + " interface is not configured", nil
		}
		key := "routine:" + run.ID + ":" + d.Kind + ":" + d.Dest
		err = c.DeliverResult(ctx, d.Binding, key, resultText(r.ID, run))
		if err == nil && entry.DisabledRoutine {
			err = c.DeliverResult(ctx, d.Binding, key+":disabled", fmt.Sprintf("Routine *%s* was %s.", r.ID, reason))
		}
	case d.Kind == TargetWebhook:
		client, guarded := s.cfg.HTTPClient, !s.operatorWebhook(r, d)
		if guarded {
			client = s.guarded
		}
		msg := WebhookPayload{RoutineID: r.ID, RunID: run.ID, Status: string(run.Status), Output: run.Output,
			Error: run.Error, FiredAt: entry.FiredAt, Kind: entry.Kind, DueAt: entry.DueAt}
		err = s.post(ctx, client, d.Dest, run.ID, msg)
		if err == nil && entry.DisabledRoutine {
			msg.Status, msg.Output, msg.Error = "disabled", "", reason
			err = s.post(ctx, client, d.Dest, run.ID+":disabled", msg)
		}
		if err != nil && guarded {
			// The reason goes to the log only: see Config.Egress.
			s.log.Warn("routine webhook delivery failed", "routine", r.ID, "run", run.ID, "source", r.Source,
				"attempt", job.Attempt, "denied", errors.Is(err, egress.ErrDenied), "err", err)
			err = errGuardedDelivery
		}
	}
	if err != nil {
		if job.MaxAttempts > 0 && job.Attempt >= job.MaxAttempts {
			return fmt.Sprintf("%s: failed after %d attempts: %v", d.Kind, job.Attempt, err), err
		}
		return fmt.Sprintf("%s: retrying (attempt %d of %d): %v", d.Kind, job.Attempt, job.MaxAttempts, err), err
	}
	if d.Binding.Platform != "" && d.Chat() {
		return "delivered to " + d.Kind + ":" + d.Dest, nil
	}
	return "delivered", nil
}

// errGuardedDelivery is all the history (and the job) says about a failed
// delivery to a webhook the operator did not write, whatever happened:
// refused by the egress policy, connection refused, EOF, timeout or a
// non-2xx answer.
var errGuardedDelivery = errors.New("delivery failed (see the gateway log)")

// operatorWebhook reports whether webhook destination d is the operator's:
// the deliver_to the config file gives r (see Scheduler.operatorTarget).
func (s *Scheduler) operatorWebhook(r core.Routine, d destination) bool {
	t, err := ParseTarget(r.DeliverTo)
	return err == nil && t == d.Target && s.operatorTarget(r)
}

// resultText is the Markdown a chat conversation gets for a routine run.
func resultText(id string, run core.Run) string {
	if run.Status == core.RunCompleted {
		out := strings.TrimSpace(run.Output)
		if out == "" {
			out = "_(no output)_"
		}
		return fmt.Sprintf("*Routine %s*\n\n%s", id, out)
	}
	msg, _, _ := strings.Cut(strings.TrimSpace(run.Error), "\n")
	return fmt.Sprintf("Routine *%s* %s: %s", id, run.Status, msg)
}

// ChatDeliverer posts routine results into chat conversations.
type ChatDeliverer interface {
	// DeliverResult posts text (Markdown) to b. key names the message and is
	// the same on every retry: a message that may already have been posted
	// is not posted again.
	DeliverResult(ctx context.Context, b core.Binding, key, text string) error
}

// SessionReader finds sessions; core.Store is one.
type SessionReader interface {
	GetSession(ctx context.Context, id string) (core.Session, error)
}

func ignoreNotFound(err error) error {
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	return err
}

// post sends one webhook delivery. Errors name the host only: webhook URLs
// often carry a secret.
func (s *Scheduler) post(ctx context.Context, client *http.Client, dest, key string, msg WebhookPayload) error {
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
	resp, err := client.Do(req)
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
