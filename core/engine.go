package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentgate/agentgate/core/tool/schema"
	"github.com/agentgate/agentgate/core/tracing"
)

// Observer receives engine measurements (Prometheus in production). Every
// method must be cheap and safe for concurrent use.
type Observer interface {
	RunFinished(status RunStatus)
	// ToolResumed is the time from an approval decision to the approved
	// tool call starting.
	ToolResumed(d time.Duration)
}

type nopObserver struct{}

func (nopObserver) RunFinished(RunStatus)     {}
func (nopObserver) ToolResumed(time.Duration) {}

// ProgressSink shows one run's progress live while this node advances it, as
// a chat adapter streaming the answer while the model writes it. It is best
// effort and in-process: what must arrive goes through the jobs committed
// with the run's state (OnFinish, approval jobs).
type ProgressSink interface {
	// Delta is a fragment of text the model streamed. It must not block.
	Delta(text string)
	// Close ends the display; it is called once. With ProgressFinished and
	// ProgressPaused it is called before the change is committed, so nothing
	// the sink sends lands after the jobs committed with the change started.
	// It may block briefly, until a call in flight ends.
	Close(reason ProgressEnd)
}

// ProgressEnd says why a ProgressSink is closed.
type ProgressEnd string

const (
	// ProgressFinished: the run is about to finish (completed or failed).
	ProgressFinished ProgressEnd = "finished"
	// ProgressPaused: the run is about to pause for an approval.
	ProgressPaused ProgressEnd = "paused"
	// ProgressStopped: this node stopped advancing the run otherwise (a step
	// failed and is retried, a commit failed, the run was cancelled, the
	// claim was lost, shutdown). It may go on later, with a new sink.
	ProgressStopped ProgressEnd = "stopped"
)

// EngineConfig configures an Engine. Store, Queue and Agents are required.
type EngineConfig struct {
	Store  Store
	Queue  Queue
	Agents map[string]*Agent
	Hub    *Hub // default: a new hub
	Clock  Clock
	Logger *slog.Logger
	// Observer of measurements; default none.
	Observer Observer
	// NodeID names this process in run claims and queue leases. A restarted
	// node that keeps its id takes its runs back at once. Default "local".
	NodeID string
	// Workers is the number of runs advanced in parallel. Default 8.
	Workers int
	// ClaimTTL is how long a run claim and a job lease last without a
	// heartbeat; a crashed node's runs are taken over after it. Default 30s.
	ClaimTTL time.Duration
	// JanitorInterval is how often every queued or running run gets its job
	// enqueued again (one it holds already is not doubled), in case an
	// external queue lost it (the store is the source of truth), or its
	// job was dead-lettered or not queued. 0 = only at start.
	JanitorInterval time.Duration
	// DrainTimeout is how long in-flight steps may finish after shutdown
	// begins before they are interrupted. Default 10s.
	DrainTimeout time.Duration
	// OnFinish, when set, returns jobs to enqueue in the transaction that
	// finishes run (e.g. a routine run's result delivery). run is as the
	// engine holds it: use its identity (ID, Type, RoutineID, SessionID),
	// not its status or output, which the finish is about to change.
	OnFinish func(run Run, status RunStatus) []Job
	// Handlers run jobs of kinds other than JobRun, by kind. An error
	// retries the job with the queue's backoff.
	Handlers map[string]func(ctx context.Context, job Job) error
	// Jobs routes jobs of kinds other than JobRun, with its middleware;
	// Handlers are added to it. Default: a router with LogJobs (and the
	// Observer's job measurements, when it is a JobObserver).
	Jobs *JobRouter
	// ExternalApproval is the approval rule of external runs (tool calls of
	// agents outside the gateway, see SubmitExternal). Default: 15 minutes,
	// anyone may decide.
	ExternalApproval ApprovalRule
	// Blobs holds the bytes of attachments; images among them are given to
	// models that take images (Agent.Images). Nil: attachments are only
	// described to the model.
	Blobs Blobs
	// Progress, when set, is called each time this node starts or resumes
	// advancing run, and returns where to show its progress live; nil
	// shows it nowhere.
	Progress func(run Run) ProgressSink
}

// Engine advances runs from their journal: it calls the model, journals its
// answer before acting on it, runs tools with a stable idempotency key,
// pauses for approvals and finishes runs. Runs of one session advance one at
// a time, in order; runs of different sessions in parallel.
type Engine struct {
	cfg EngineConfig
	log *slog.Logger

	// ackInFinish: the store is the queue, so a run job is acked in the
	// transaction that finishes its run (one write instead of two).
	ackInFinish bool
	// maxHistory is the most earlier runs any agent puts in its context:
	// what StartRun reads.
	maxHistory int
	// outbox is the store's own queue when the engine consumes another
	// one (Redis): runs created here have their job sent straight to the
	// queue, with the outbox as the fallback. Nil otherwise.
	outbox Queue

	mu      sync.Mutex
	running map[string]*advancing         // runs a local worker advances
	cancels map[string]context.CancelFunc // to stop a local run on cancel
}

// NewEngine checks cfg and fills its defaults.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Store == nil || cfg.Queue == nil {
		return nil, errors.New("engine: store and queue are required")
	}
	if len(cfg.Agents) == 0 {
		return nil, errors.New("engine: at least one agent is required")
	}
	if cfg.Hub == nil {
		cfg.Hub = &Hub{}
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "local"
	}
	if cfg.Jobs == nil {
		o, _ := cfg.Observer.(JobObserver)
		cfg.Jobs = NewJobRouter(LogJobs(cfg.Logger, o))
	}
	if err := cfg.Jobs.HandleAll(cfg.Handlers); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if cfg.Jobs.Handles(JobRun) {
		return nil, fmt.Errorf("engine: jobs of kind %q are the engine's own", JobRun)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = 30 * time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	maxHistory := 0
	for _, a := range cfg.Agents {
		maxHistory = max(maxHistory, a.historyRuns())
	}
	outbox, _ := cfg.Store.(Queue)
	if any(cfg.Store) == any(cfg.Queue) || cfg.JanitorInterval <= 0 {
		outbox = nil // the store is the queue, or no janitor would find a lost job
	}
	return &Engine{
		cfg:         cfg,
		log:         cfg.Logger,
		ackInFinish: any(cfg.Store) == any(cfg.Queue),
		maxHistory:  maxHistory,
		outbox:      outbox,
		running:     make(map[string]*advancing),
		cancels:     make(map[string]context.CancelFunc),
	}, nil
}

// Hub returns the engine's update hub.
func (e *Engine) Hub() *Hub { return e.cfg.Hub }

// Agent returns the agent called id.
func (e *Engine) Agent(id string) (*Agent, bool) {
	a, ok := e.cfg.Agents[id]
	return a, ok
}

// Agents returns the configured agents sorted by id.
func (e *Engine) Agents() []*Agent {
	out := make([]*Agent, 0, len(e.cfg.Agents))
	for _, a := range e.cfg.Agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Agent) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// SubmitRequest is a new input for an agent.
type SubmitRequest struct {
	// RunID names the new run; empty = a fresh id. A caller sets it to
	// subscribe to the run's updates before the run starts.
	RunID   string
	AgentID string
	Input   string
	// SessionID continues a session; empty starts a new one.
	SessionID string
	UserID    string
	// StartedBy is the principal that starts the run (from its credential):
	// the requester of its approvals. Default UserID.
	StartedBy string
	Type      RunType // default api
	Binding   Binding
	RoutineID string
	// Platform and DedupeKey: when DedupeKey is set, the submission is
	// idempotent per Platform (default Binding.Platform): a second Submit
	// with the same pair starts nothing and fails with a *DuplicateError
	// naming the first run.
	Platform  string
	DedupeKey string
	// Attachments are the files given with Input, their bytes stored in
	// EngineConfig.Blobs. A message may be attachments alone.
	Attachments []Attachment
}

// InputError is a request the caller must fix.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// Submit stores a new run (and its session) and enqueues it.
func (e *Engine) Submit(ctx context.Context, req SubmitRequest) (Run, error) {
	if _, ok := e.cfg.Agents[req.AgentID]; !ok {
		return Run{}, fmt.Errorf("agent %q: %w", req.AgentID, ErrNotFound)
	}
	return e.submit(ctx, req)
}

// submit stores the run of req; more are journaled after its user message.
func (e *Engine) submit(ctx context.Context, req SubmitRequest, more ...Event) (Run, error) {
	if strings.TrimSpace(req.Input) == "" && len(req.Attachments) == 0 {
		return Run{}, &InputError{Msg: "input: must not be empty"}
	}
	now := e.cfg.Clock.Now().UTC()
	sid := req.SessionID
	if sid == "" {
		sid = NewID("ses")
	}
	if req.Type == "" {
		req.Type = RunTypeAPI
	}
	id := req.RunID
	if id == "" {
		id = NewID("run")
	}
	run := Run{
		ID: id, SessionID: sid, AgentID: req.AgentID, UserID: req.UserID, StartedBy: cmp.Or(req.StartedBy, req.UserID),
		Type: req.Type, Status: RunQueued, RoutineID: req.RoutineID, Input: req.Input, CreatedAt: now,
	}
	platform := req.Platform
	if platform == "" {
		platform = req.Binding.Platform
	}
	evs := append([]Event{NewEvent(EventUserMessage, UserMessage{Text: req.Input, UserID: req.UserID, Attachments: req.Attachments})}, more...)
	for i := range evs {
		evs[i].CreatedAt = now
	}
	// With a worker of this process idle (or about to be: a backlog of at
	// most one job per worker), the run starts as it is created and its
	// job goes to that worker in memory (Handoff).
	var start *StartAtCreate
	hand, _ := e.cfg.Queue.(Handoff)
	if hand != nil && e.ackInFinish && hand.Reserve(e.cfg.Workers) {
		running := NewEvent(EventStatus, StatusChange{Status: RunRunning})
		running.CreatedAt = now
		start = &StartAtCreate{Owner: e.cfg.NodeID, Until: now.Add(e.cfg.ClaimTTL), Events: []Event{running}}
	}
	created, err := e.cfg.Store.CreateRun(ctx, NewRun{
		Session: Session{ID: sid, AgentID: req.AgentID, UserID: req.UserID, Binding: req.Binding,
			Title: title(req.Input), CreatedAt: now, UpdatedAt: now},
		Run:       run,
		Events:    evs,
		Platform:  platform,
		DedupeKey: req.DedupeKey,
		NoJob:     e.outbox != nil,
		Start:     start,
	})
	if start != nil {
		if err == nil && start.Job != nil {
			e.cfg.Hub.ChangedTo(created.ID, RunRunning)
			hand.Handoff(*start.Job, start.Owner, start.Until)
		} else {
			hand.Unreserve()
		}
	}
	if err != nil {
		return Run{}, fmt.Errorf("submit: %w", err)
	}
	if e.outbox != nil {
		// The run's job goes to a worker of this process that waits with
		// nothing to do, in memory, or else to the queue. Either way it
		// lives outside the store: should this process end before the
		// run's step, the janitor enqueues the run again (RequeueActive, at
		// start and every JanitorInterval), as when the queue refuses it.
		if hand != nil && hand.Reserve(0) {
			hand.Handoff(RunJobFor(created.ID), e.cfg.NodeID, now.Add(e.cfg.ClaimTTL))
		} else {
			e.enqueueRun(ctx, created.ID)
		}
	}
	return created, nil
}

// enqueueRun sends run id's job straight to the external queue, after the
// commit that created the run: the relay would take it from the store's
// outbox two round trips and a wake-up later. When the queue refuses it,
// the job goes to the outbox, which the relay forwards once the queue is
// back; should that fail too (or the process die first), RequeueActive
// finds the run (at start and every JanitorInterval).
func (e *Engine) enqueueRun(ctx context.Context, id string) {
	ctx = context.WithoutCancel(ctx)
	err := e.cfg.Queue.Enqueue(ctx, RunJobFor(id))
	if err == nil || errors.Is(err, ErrJobExists) {
		return
	}
	e.log.Warn("run job not queued; it goes through the outbox", "run", id, "err", err)
	if err := e.outbox.Enqueue(ctx, RunJobFor(id)); err != nil {
		e.log.Error("run job not in the outbox either; the janitor will requeue the run", "run", id, "err", err)
	}
}

func title(input string) string {
	t := strings.Join(strings.Fields(input), " ")
	if r := []rune(t); len(r) > 80 {
		t = string(r[:79]) + "…"
	}
	return t
}

// Cancel cancels a run that has not finished, wherever it is running, and
// its pending approvals.
// c.By is the principal cancelling; c.At defaults to now.
func (e *Engine) Cancel(ctx context.Context, id string, c Cancel) (Run, error) {
	if c.At.IsZero() {
		c.At = e.cfg.Clock.Now().UTC()
	}
	run, err := e.cfg.Store.CancelRun(ctx, id, c)
	if err != nil {
		return run, err
	}
	e.mu.Lock()
	if cancel, ok := e.cancels[id]; ok {
		cancel()
	}
	e.mu.Unlock()
	e.cfg.Observer.RunFinished(RunCancelled)
	e.cfg.Hub.ChangedTo(id, RunCancelled)
	traceFinished(run)
	return run, nil
}

// traceFinished sends the run span of a finished run.
func traceFinished(r Run) {
	if r.FinishedAt != nil {
		tracing.Finished(r.ID, r.AgentID, string(r.Status), r.Error, r.CreatedAt, *r.FinishedAt)
	}
}

// Start makes the queued and running runs left by an earlier process
// runnable again, then runs the worker pool until ctx ends. When ctx ends the
// workers stop taking jobs and in-flight steps get DrainTimeout to finish;
// steps still running then are interrupted and their jobs handed back to the
// queue, to resume from the journal on this or another node.
func (e *Engine) Start(ctx context.Context) error {
	if n, err := e.cfg.Queue.Recover(ctx, e.cfg.NodeID); err != nil {
		return fmt.Errorf("engine: recover jobs: %w", err)
	} else if n > 0 {
		e.log.Info("recovered leased jobs", "node", e.cfg.NodeID, "jobs", n)
	}
	if n, err := e.cfg.Store.RequeueActive(ctx); err != nil {
		return fmt.Errorf("engine: requeue active runs: %w", err)
	} else if n > 0 {
		e.log.Info("resuming runs", "runs", n)
	}
	work, interrupt := context.WithCancel(context.WithoutCancel(ctx))
	defer interrupt()
	var wg sync.WaitGroup
	for range e.cfg.Workers {
		wg.Go(func() { e.work(ctx, work) })
	}
	if e.cfg.JanitorInterval > 0 {
		wg.Go(func() { e.janitor(ctx) })
	}
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		close(drained)
	}()
	<-ctx.Done()
	select {
	case <-drained:
	case <-time.After(e.cfg.DrainTimeout):
		e.log.Warn("drain timeout: interrupting in-flight runs", "timeout", e.cfg.DrainTimeout)
		interrupt()
		<-drained
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if n, err := e.cfg.Queue.Recover(hctx, e.cfg.NodeID); err != nil {
		return fmt.Errorf("engine: hand back jobs: %w", err)
	} else if n > 0 {
		e.log.Info("handed back unfinished jobs", "jobs", n)
	}
	return nil
}

// janitor re-enqueues active runs every JanitorInterval until ctx ends.
func (e *Engine) janitor(ctx context.Context) {
	t := time.NewTicker(e.cfg.JanitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := e.cfg.Store.RequeueActive(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("janitor: requeue active runs", "err", err)
		} else if n > 0 {
			e.log.Debug("janitor: requeued active runs", "runs", n)
		}
	}
}

// work takes jobs until ctx ends and runs each under work, which outlives
// ctx by the drain timeout.
func (e *Engine) work(ctx, work context.Context) {
	for {
		job, err := e.cfg.Queue.Dequeue(ctx, e.cfg.NodeID, e.cfg.ClaimTTL)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Error("dequeue", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		e.handle(work, job)
	}
}

// handle processes one job; a failure is retried with backoff, and a job that
// exhausts its attempts fails its run.
func (e *Engine) handle(ctx context.Context, job Job) {
	if o, ok := e.cfg.Observer.(JobWaitObserver); ok && !job.RunAt.IsZero() {
		o.JobWaited(job.Kind, e.cfg.Clock.Now().Sub(job.RunAt))
	}
	jctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// A run job's lease is soft: the run's claim, with a heartbeat of its
	// own, keeps other workers off the run, so a lease lost or not
	// extended (Redis flushed or down) only means the job may be delivered
	// again, where the claim turns it away. Stopping the step would cut
	// its tool call short, to be called again.
	go e.heartbeat(jctx, func(ctx context.Context) error {
		return e.cfg.Queue.Extend(ctx, job, e.cfg.ClaimTTL)
	}, stop, job.Kind == JobRun)

	var err error
	var runID string
	var ack *jobAck
	if e.ackInFinish {
		ack = &jobAck{job: job}
	}
	if job.Kind == JobRun {
		var p RunJob
		if err = json.Unmarshal(job.Payload, &p); err == nil {
			runID = p.RunID
			err = recovered(JobRun, func(ctx context.Context, _ Job) error { return e.advance(ctx, p.RunID, job.ID, ack) })(jctx, job)
		}
	} else if herr, ok := e.cfg.Jobs.Run(jctx, job); ok {
		err = herr
	} else if job.Kind != JobApproval { // no chat adapter renders approval cards here: nothing to do
		err = fmt.Errorf("unknown job kind %q", job.Kind)
	}
	if ctx.Err() != nil {
		return // interrupted at shutdown: Start hands the job back
	}
	if err == nil {
		if ack.done() {
			return // the run's finish acked it
		}
		if aerr := e.cfg.Queue.Ack(ctx, job); aerr != nil && !errors.Is(aerr, ErrLeaseLost) {
			e.log.Error("ack job", "job", job.ID, "err", aerr)
		}
		return
	}
	dead, ferr := e.cfg.Queue.Fail(ctx, job, err.Error(), RetryAfter(err)) // a provider's Retry-After, else the backoff
	if ferr != nil {
		e.log.Error("fail job", "job", job.ID, "err", ferr)
		return
	}
	if runID != "" {
		e.log.Warn("run step failed", "run", runID, "attempt", job.Attempt, "dead", dead, "err", err)
	} else {
		e.log.Warn("job failed", "kind", job.Kind, "job", job.ID, "attempt", job.Attempt, "dead", dead, "err", err)
	}
	if dead && runID != "" {
		msg := fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, err)
		e.finish(ctx, nil, nil, runID, "", RunFailed, "", msg, Usage{})
	}
}

// heartbeat calls extend every third of the claim TTL until ctx ends. It
// stops the work (with the error as cause) when the claim or lease is gone,
// or when extends kept failing or hanging so that it may run out before
// the next one; a passing failure (a store blip) is only logged. Each
// extend may take a third of the TTL, less when the claim runs out sooner.
// With soft (a run job's lease: the run's claim guards the run), the work
// is never stopped: failures are logged, and a lost lease ends the
// heartbeat.
func (e *Engine) heartbeat(ctx context.Context, extend func(context.Context) error, stop context.CancelCauseFunc, soft bool) {
	every := e.cfg.ClaimTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	expires := time.Now().Add(e.cfg.ClaimTTL) // about when it runs out: a little later than the store's
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		limit := every
		if !soft {
			limit = min(every, time.Until(expires)-every/2)
		}
		err := errClaimRunningOut
		if limit > 0 {
			ectx, cancel := context.WithTimeout(ctx, limit)
			err = extend(ectx)
			cancel()
		}
		lost := errors.Is(err, ErrClaimLost) || errors.Is(err, ErrLeaseLost)
		switch {
		case err == nil:
			expires = start.Add(e.cfg.ClaimTTL)
		case ctx.Err() != nil:
			return
		case soft && lost:
			e.log.Warn("job lease lost; the run's claim keeps others off the run", "err", err)
			return
		case soft:
			e.log.Warn("job lease heartbeat failed; retrying", "err", err)
		case lost, time.Until(expires) < every+every/2:
			e.log.Warn("lost claim or lease", "err", err)
			stop(err)
			return
		default:
			e.log.Warn("heartbeat failed; retrying", "err", err)
		}
	}
}

// errClaimRunningOut stops the work when extends failed until too little
// of the claim is left to try again.
var errClaimRunningOut = errors.New("claim heartbeat: extends failed until the claim was about to run out")

// advancing is a run a local worker advances.
type advancing struct {
	job   string        // the job it advances it for
	again bool          // another job for the run came meanwhile
	done  chan struct{} // closed when the worker is done with the run
}

// lockRun serializes local workers on one run. Another job for a run a
// local worker is advancing does not wait for it, holding a worker: the
// janitor's, every JanitorInterval on an external queue, would park one
// more worker per pass of one long run, then all of them. It is noted
// instead (busy), and the worker done with the run enqueues its job once
// more if its step ended well (unlock(true)): the job may carry news, such
// as a decision that came as the step paused; after a failed step, that
// job's retry, with its backoff, is the look again. The same job delivered
// again (its lease ran out, or a restart recovered it) waits: it is the
// one the first worker acks or fails.
func (e *Engine) lockRun(ctx context.Context, id, job string) (unlock func(ok bool), busy bool, err error) {
	for {
		e.mu.Lock()
		a, held := e.running[id]
		switch {
		case !held:
			a = &advancing{job: job, done: make(chan struct{})}
			e.running[id] = a
			e.mu.Unlock()
			return func(ok bool) { e.unlockRun(ctx, id, a, ok) }, false, nil
		case a.job != job:
			a.again = true
			e.mu.Unlock()
			return nil, true, nil
		}
		e.mu.Unlock()
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// unlockRun ends lockRun's hold on run id, and enqueues its job once more
// when another came meanwhile and the step ended well.
func (e *Engine) unlockRun(ctx context.Context, id string, a *advancing, ok bool) {
	e.mu.Lock()
	delete(e.running, id)
	again := a.again
	e.mu.Unlock()
	close(a.done)
	if !again || !ok {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if err := e.cfg.Queue.Enqueue(ctx, RunJobFor(id)); err != nil && !errors.Is(err, ErrJobExists) {
		// RequeueActive finds the run at start, and every JanitorInterval,
		// while it is queued or running.
		e.log.Error("run job after a step not queued; the run waits for the janitor or a restart", "run", id, "err", err)
	}
}

// jobAck is the job a run step was dequeued for, when the store is the
// queue: the finish acks it in its transaction and says so.
type jobAck struct {
	job   Job
	acked bool
}

func (a *jobAck) done() bool { return a != nil && a.acked }

// advance moves run id forward until it pauses, finishes or fails a step.
// ack (nil: none) is the job to ack in the finishing transaction.
func (e *Engine) advance(ctx context.Context, id, job string, ack *jobAck) (err error) {
	unlock, busy, err := e.lockRun(ctx, id, job)
	if busy || err != nil {
		return err // busy: the local worker advancing it looks again when done
	}
	defer func() { unlock(err == nil) }()

	st := e.cfg.Store
	now := e.cfg.Clock.Now().UTC()
	running := NewEvent(EventStatus, StatusChange{Status: RunRunning})
	running.CreatedAt = now
	// One call claims the run if it is its session's head and reads its
	// journal and the history its agent wants (the agent is known from the
	// job only through the run: ask for the most any agent wants).
	started, err := st.StartRun(ctx, Start{ID: id, Owner: e.cfg.NodeID, Now: now, Until: now.Add(e.cfg.ClaimTTL),
		Events: []Event{running}, History: e.maxHistory})
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotHead):
		return nil // no such run, or an earlier run of the session goes first; finishing it enqueues this one
	case errors.Is(err, ErrClaimed):
		// Another node drives it — or died holding it. Look again once its
		// claim must have run out, so a dead holder's run is not left waiting
		// for the janitor.
		later := RunJobFor(id)
		later.RunAt = now.Add(e.cfg.ClaimTTL)
		if err := e.cfg.Queue.Enqueue(ctx, later); err != nil {
			return fmt.Errorf("re-enqueue claimed run %s: %w", id, err)
		}
		return nil
	case errors.Is(err, ErrRunPaused), errors.Is(err, ErrRunFinished):
		return nil // it stopped meanwhile
	case err != nil:
		return err
	}
	run := started.Run
	if started.Began {
		e.cfg.Hub.ChangedTo(id, RunRunning)
	}
	agent, ok := e.cfg.Agents[run.AgentID]
	if !ok && run.Type != RunTypeExternal { // an external run's agent lives outside
		e.finish(ctx, &run, nil, id, "", RunFailed, "", fmt.Sprintf("agent %q is not configured", run.AgentID), Usage{})
		return nil
	}

	rctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	defer cancel()
	e.mu.Lock()
	e.cancels[id] = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.cancels, id)
		e.mu.Unlock()
	}()
	go e.heartbeat(rctx, func(ctx context.Context) error {
		return st.ExtendClaim(ctx, id, e.cfg.NodeID, e.cfg.Clock.Now().Add(e.cfg.ClaimTTL))
	}, cancelCause, false)

	r := &runner{e: e, agent: agent, run: run, ack: ack, journal: started.Journal, history: started.History}
	if e.cfg.Progress != nil {
		r.progress = e.cfg.Progress(run)
	}
	defer r.endProgress(ProgressStopped)
	err = r.loop(rctx)
	if errors.Is(err, ErrRunFinished) || errors.Is(err, ErrClaimLost) {
		return nil // cancelled or taken over: nothing more for us to do
	}
	if err != nil && ctx.Err() != nil {
		// Interrupted mid-step at shutdown:
		// give the claim up, so the job handed back runs on another node at
		// once instead of after the claim expires.
		cancel() // stops the heartbeat
		e.releaseClaim(id)
	}
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		if cause := context.Cause(rctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, ErrClaimLost) {
			return fmt.Errorf("claim heartbeat: %w", cause) // the store kept failing: retry later
		}
		return nil // stopped by a cancel, or another node took the run over
	}
	return err
}

// releaseClaim ends this node's claim on run id now (best effort: otherwise
// it expires after ClaimTTL).
func (e *Engine) releaseClaim(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cfg.Store.ExtendClaim(ctx, id, e.cfg.NodeID, e.cfg.Clock.Now()); err != nil {
		e.log.Debug("release claim", "run", id, "err", err)
	}
}

// finish closes a run and announces it; first are journaled before the
// closing status event, in the same transaction, and ack's job is acked
// in it (nil: none). known is the run when the
// caller holds it (OnFinish reads only what never changes: its id, type,
// routine), nil to read it. Errors are logged: the run stays active in the
// store and is retried.
func (e *Engine) finish(ctx context.Context, known *Run, ack *jobAck, id, owner string, status RunStatus, output, errMsg string, usage Usage, first ...Event) error {
	ev := NewEvent(EventStatus, StatusChange{Status: status, Error: errMsg})
	now := e.cfg.Clock.Now().UTC()
	evs := append(first, ev)
	for i := range evs {
		evs[i].CreatedAt = now
	}
	var jobs []Job
	if e.cfg.OnFinish != nil {
		if known == nil {
			run, err := e.cfg.Store.GetRun(ctx, id)
			if err != nil {
				e.log.Error("finish run", "run", id, "err", err)
				return err
			}
			known = &run
		}
		jobs = e.cfg.OnFinish(*known, status)
	}
	f := Finish{Status: status, Output: output, Error: errMsg, Usage: usage, At: now, Events: evs, Jobs: jobs}
	if ack != nil {
		f.Ack = &ack.job
	}
	fin, err := e.cfg.Store.FinishRun(ctx, id, owner, f)
	if err == nil && ack != nil {
		ack.acked = true
	}
	if err != nil {
		if !errors.Is(err, ErrRunFinished) {
			e.log.Error("finish run", "run", id, "err", err)
		}
		return err
	}
	e.cfg.Observer.RunFinished(status)
	e.cfg.Hub.Settled(fin)
	traceFinished(fin)
	return nil
}

// runner advances one claimed run.
type runner struct {
	e        *Engine
	agent    *Agent
	run      Run
	journal  []Event // as StartRun read it; folded into state by load
	history  []Run   // the session's completed runs before this one, oldest first (StartRun)
	state    journalState
	progress ProgressSink // nil when nothing shows the run live
	ack      *jobAck      // the step's job, acked by the finish; nil: acked after
}

// endProgress closes the run's live display, if it is still open.
func (r *runner) endProgress(reason ProgressEnd) {
	if r.progress != nil {
		r.progress.Close(reason)
		r.progress = nil
	}
}

// finish ends the live display, then the run.
func (r *runner) finish(ctx context.Context, status RunStatus, output, errMsg string, usage Usage, first ...Event) error {
	r.endProgress(ProgressFinished)
	return r.e.finish(ctx, &r.run, r.ack, r.run.ID, r.e.cfg.NodeID, status, output, errMsg, usage, first...)
}

// journalState is the fold of a run's journal.
type journalState struct {
	events    []Event
	responses int            // model responses so far
	last      *ModelResponse // latest model response
	results   map[string]ToolResult
	started   map[string]bool
	requested map[string]ApprovalRequested // by tool call id
	decided   map[string]decidedAt         // by approval id
	usage     Usage
}

type decidedAt struct {
	ApprovalDecided
	at time.Time
}

// decode reads an event's payload.
func decode[T any](ev Event) (T, error) {
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		return v, fmt.Errorf("journal %s seq %d: %w", ev.RunID, ev.Seq, err)
	}
	return v, nil
}

func (s *journalState) apply(ev Event) error {
	s.events = append(s.events, ev)
	var err error
	switch ev.Type {
	case EventModelResponse:
		var m ModelResponse
		if m, err = decode[ModelResponse](ev); err == nil {
			s.responses++
			s.last = &m
			s.usage = s.usage.Add(m.Usage)
		}
	case EventToolStarted:
		var t ToolStarted
		if t, err = decode[ToolStarted](ev); err == nil {
			s.started[t.ToolCallID] = true
		}
	case EventToolResult:
		var t ToolResult
		if t, err = decode[ToolResult](ev); err == nil {
			s.results[t.ToolCallID] = t
		}
	case EventApprovalRequested:
		var a ApprovalRequested
		if a, err = decode[ApprovalRequested](ev); err == nil {
			s.requested[a.ToolCallID] = a
		}
	case EventApprovalDecided:
		var d ApprovalDecided
		if d, err = decode[ApprovalDecided](ev); err == nil {
			s.decided[d.ApprovalID] = decidedAt{ApprovalDecided: d, at: ev.CreatedAt}
		}
	}
	return err
}

func (r *runner) load(context.Context) error {
	evs := r.journal
	r.journal = nil
	r.state = journalState{
		results:   map[string]ToolResult{},
		started:   map[string]bool{},
		requested: map[string]ApprovalRequested{},
		decided:   map[string]decidedAt{},
	}
	for _, ev := range evs {
		if err := r.state.apply(ev); err != nil {
			return err
		}
	}
	return nil
}

// append journals events (the journal comes first) and folds them in.
func (r *runner) append(ctx context.Context, evs ...Event) error {
	now := r.e.cfg.Clock.Now().UTC()
	for i := range evs {
		evs[i].CreatedAt = now
	}
	stored, err := r.e.cfg.Store.AppendEvents(ctx, r.run.ID, r.e.cfg.NodeID, evs)
	if err != nil {
		return err
	}
	for _, ev := range stored {
		if err := r.state.apply(ev); err != nil {
			return err
		}
	}
	r.e.cfg.Hub.ChangedTo(r.run.ID, RunRunning)
	return nil
}

// loop takes one step at a time until the run pauses or finishes.
func (r *runner) loop(ctx context.Context) error {
	if err := r.load(ctx); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done, err := r.step(ctx)
		if err != nil || done {
			return err
		}
	}
}

// step performs the next action the journal calls for; done means the run
// paused or finished.
func (r *runner) step(ctx context.Context) (done bool, err error) {
	if r.run.Type == RunTypeExternal {
		return r.externalStep(ctx)
	}
	s := &r.state
	if s.last != nil && len(s.last.ToolCalls) == 0 {
		return true, r.finish(ctx, RunCompleted, s.last.Text, "", s.usage)
	}
	if s.last != nil {
		for _, call := range s.last.ToolCalls {
			if _, ok := s.results[call.ID]; ok {
				continue
			}
			return r.toolStep(ctx, call)
		}
	}
	// No answer yet, or every tool call has its result: ask the model.
	if s.responses >= r.agent.maxSteps() {
		msg := fmt.Sprintf("stopped after %d model calls (max_steps)", s.responses)
		return true, r.finish(ctx, RunFailed, "", msg, s.usage)
	}
	return r.callModel(ctx)
}

// callModel asks the model for the next turn and journals it. A final
// answer (no tool calls) is journaled in the same transaction that completes
// the run; done reports that.
func (r *runner) callModel(ctx context.Context) (done bool, err error) {
	req, err := r.modelRequest(ctx)
	if err != nil {
		return false, err
	}
	hub, sink := r.e.cfg.Hub, r.progress
	mctx, span := tracing.Start(ctx, r.run.ID, tracing.SpanModelCall, attribute.String("agentgate.agent", r.agent.ID),
		attribute.String("gen_ai.system", r.agent.Provider), attribute.String("gen_ai.request.model", r.agent.ModelName))
	resp, err := r.agent.Model.Generate(mctx, req, func(text string) {
		hub.Publish(Update{RunID: r.run.ID, Delta: text})
		if sink != nil {
			sink.Delta(text)
		}
	})
	if err == nil {
		span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens), attribute.Int("agentgate.tool_calls", len(resp.ToolCalls)))
	}
	tracing.End(span, err)
	if err != nil {
		return false, fmt.Errorf("model: %w", err)
	}
	for i, c := range resp.ToolCalls {
		if c.ID == "" {
			resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", r.state.responses+1, i)
		}
		if len(c.Arguments) == 0 {
			resp.ToolCalls[i].Arguments = json.RawMessage("{}")
		}
	}
	ev := NewEvent(EventModelResponse, resp)
	if len(resp.ToolCalls) == 0 {
		usage := r.state.usage.Add(resp.Usage)
		return true, r.finish(ctx, RunCompleted, resp.Text, "", usage, ev)
	}
	return false, r.append(ctx, ev)
}

// modelRequest builds the conversation: earlier runs of the session (input
// and answer), then this run's journal.
func (r *runner) modelRequest(ctx context.Context) (ModelRequest, error) {
	req := ModelRequest{Instructions: r.agent.Instructions}
	tools, err := r.agent.tools(ctx)
	if err != nil {
		return req, fmt.Errorf("tools: %w", err)
	}
	for _, t := range tools {
		req.Tools = append(req.Tools, t.Spec)
	}
	limit, large := r.agent.largeResultChars(), false
	if n := r.agent.historyRuns(); n > 0 {
		hist := r.history
		if len(hist) > n {
			hist = hist[len(hist)-n:] // the last n (another agent wanted more)
		}
		for _, h := range hist {
			req.Messages = append(req.Messages,
				Message{Role: RoleUser, Content: h.Input},
				Message{Role: RoleAssistant, Content: h.Output})
		}
	}
	for _, ev := range r.state.events {
		switch ev.Type {
		case EventUserMessage:
			m, err := decode[UserMessage](ev)
			if err != nil {
				return req, err
			}
			msg, err := r.userMessage(ctx, m)
			if err != nil {
				return req, err
			}
			req.Messages = append(req.Messages, msg)
		case EventModelResponse:
			m, err := decode[ModelResponse](ev)
			if err != nil {
				return req, err
			}
			req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: m.Text, ToolCalls: m.ToolCalls})
		case EventToolResult:
			t, err := decode[ToolResult](ev)
			if err != nil {
				return req, err
			}
			content, shortened := shownResult(t, limit)
			large = large || shortened
			req.Messages = append(req.Messages, Message{Role: RoleTool, Content: content, ToolCallID: t.ToolCallID, Name: t.Tool})
		}
	}
	if large {
		for _, spec := range resultToolSpecs {
			if _, own := r.agent.Tool(spec.Name); !own {
				req.Tools = append(req.Tools, spec)
			}
		}
	}
	return req, nil
}

// Images a model is shown with one message: at most MaxImages, each at most
// MaxImageBytes (Anthropic's limit per image) and MaxImagesBytes in all
// (a request stays under the providers' size limits, and in memory). The
// rest are described, with why they are not shown.
const (
	MaxImages      = 8
	MaxImageBytes  = 5_000_000
	MaxImagesBytes = 20_000_000
)

// userMessage is m as the model reads it: its text, with each attachment
// described, or given as an image when the agent's model takes images.
func (r *runner) userMessage(ctx context.Context, m UserMessage) (Message, error) {
	images := r.agent.Images && r.e.cfg.Blobs != nil
	msg := Message{Role: RoleUser, Content: userContent(m.Text, m.Attachments, images)}
	var total int64
	for _, a := range m.Attachments {
		if !images || !a.Image() {
			continue
		}
		switch {
		case a.Size > MaxImageBytes:
			a.Note = "not shown: larger than the " + ByteSize(MaxImageBytes) + " an image may be"
		case len(msg.Files) == MaxImages:
			a.Note = fmt.Sprintf("not shown: a message shows at most %d images", MaxImages)
		case total+a.Size > MaxImagesBytes:
			a.Note = "not shown: the message's images are over " + ByteSize(MaxImagesBytes) + " in all"
		}
		if a.Note != "" {
			a.ID = ""
			msg.Content = userContent(msg.Content, []Attachment{a}, false)
			continue
		}
		total += a.Size
		data, err := r.e.cfg.Blobs.GetBlob(ctx, a.ID)
		if errors.Is(err, ErrNotFound) { // gone (pruned): described instead
			a.Note, a.ID = "no longer stored", ""
			msg.Content = userContent(msg.Content, []Attachment{a}, false)
			continue
		}
		if err != nil {
			return msg, fmt.Errorf("attachment %s: %w", a.Name, err)
		}
		msg.Files = append(msg.Files, File{Attachment: a, Data: data})
	}
	return msg, nil
}

// toolStep advances one tool call: refuse, ask for approval, or execute.
func (r *runner) toolStep(ctx context.Context, call ToolCall) (bool, error) {
	s := &r.state
	result := func(content string) (bool, error) {
		return false, r.append(ctx, NewEvent(EventToolResult, ToolResult{
			ToolCallID: call.ID, Tool: call.Name, Content: content, IsError: true,
		}))
	}
	if res, ok := r.resultTool(call); ok {
		return false, r.append(ctx, NewEvent(EventToolResult, res))
	}
	tools, err := r.agent.tools(ctx)
	if err != nil {
		return false, fmt.Errorf("tools: %w", err)
	}
	tool := findTool(tools, call.Name)
	if tool == nil {
		return result(fmt.Sprintf("error: there is no tool named %q; available tools: %s", call.Name, toolNames(tools)))
	}
	if tool.Validate != nil {
		if err := tool.Validate(call.Arguments); err != nil {
			return result("error: " + err.Error() + ". Fix the arguments and call the tool again.")
		}
	}
	args := call.Arguments
	req, asked := s.requested[call.ID]
	if !asked && tool.Approval.Required {
		canon, err := schema.Canonical(call.Arguments)
		if err != nil {
			return result("error: " + err.Error() + ". Send the arguments as one JSON object.")
		}
		return true, r.requestApproval(ctx, call, tool, canon)
	}
	if asked {
		// A call asked about follows its decision whatever the tool's rule
		// says now (the config, or an MCP server's listing, may have
		// changed meanwhile): denied or expired, it never runs; approved,
		// it runs with the approved arguments, on the tool approved.
		if req.Origin != "" && req.Origin != toolOrigin(tool) {
			return result(fmt.Sprintf("The approved tool %s came from %s; that name is now %s's. The tool did not run.",
				call.Name, req.Origin, toolOrigin(tool)))
		}
		d, decided := s.decided[req.ApprovalID]
		if !decided {
			return false, fmt.Errorf("run %s: approval %s has no decision in the journal", r.run.ID, req.ApprovalID)
		}
		switch d.Status {
		case ApprovalApproved:
			args = req.Arguments // exactly what was approved
			if !s.started[call.ID] {
				r.e.cfg.Observer.ToolResumed(r.e.cfg.Clock.Now().Sub(d.at))
			}
		case ApprovalDenied:
			msg := "The call was denied"
			if cmp.Or(d.DecidedByName, d.DecidedBy) != "" {
				msg += " by " + cmp.Or(d.DecidedByName, d.DecidedBy)
			}
			if d.Reason != "" {
				msg += ": " + d.Reason
			}
			return result(msg + ". The tool did not run.")
		case ApprovalExpired:
			return result("The approval request expired before anyone decided. The tool did not run.")
		default:
			return result(fmt.Sprintf("The approval was %s. The tool did not run.", d.Status))
		}
	}
	return false, r.execute(ctx, call, tool, args)
}

// toolOrigin is tool's Origin as approvals record it.
func toolOrigin(tool *AgentTool) string { return cmp.Or(tool.Origin, "agent") }

func findTool(tools []AgentTool, name string) *AgentTool {
	for i := range tools {
		if tools[i].Spec.Name == name {
			return &tools[i]
		}
	}
	return nil
}

func toolNames(tools []AgentTool) string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Spec.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// execute runs the tool at least once under the stable key run_id:call_id and
// journals its result once.
func (r *runner) execute(ctx context.Context, call ToolCall, tool *AgentTool, args json.RawMessage) error {
	key := r.run.ID + ":" + call.ID
	if !r.state.started[call.ID] {
		if err := r.append(ctx, NewEvent(EventToolStarted, ToolStarted{
			ToolCallID: call.ID, Tool: call.Name, IdempotencyKey: key,
		})); err != nil {
			return err
		}
	}
	var content string
	var files []File
	var err error
	tctx, span := tracing.Start(ctx, r.run.ID, tracing.SpanToolCall, attribute.String("agentgate.tool", call.Name),
		attribute.String("agentgate.tool_call.id", call.ID))
	if ft, ok := tool.Tool.(FileTool); ok {
		content, files, err = ft.CallFiles(tctx, args, key)
	} else {
		content, err = tool.Tool.Call(tctx, args, key)
	}
	tracing.End(span, err)
	res := ToolResult{ToolCallID: call.ID, Tool: call.Name, Content: content}
	var terr *ToolError
	switch {
	case errors.As(err, &terr):
		res.Content, res.IsError = "error: "+terr.Message, true
	case err != nil:
		return fmt.Errorf("tool %s: %w", call.Name, err) // retried with the same key
	}
	if res.Files, err = r.storeFiles(ctx, files); err != nil {
		return fmt.Errorf("tool %s: %w", call.Name, err)
	}
	res.Content = userContent(res.Content, res.Files, false)
	return r.append(ctx, NewEvent(EventToolResult, res))
}

// storeFiles keeps the files a tool returned; without a blob store they
// are only described.
func (r *runner) storeFiles(ctx context.Context, files []File) ([]Attachment, error) {
	var out []Attachment
	for _, f := range files {
		a := f.Attachment
		a.Size = int64(len(f.Data))
		a.Name = FileName(a.Name)
		if r.e.cfg.Blobs == nil {
			a.Note = "not kept: this gateway has no file store"
		} else {
			id, err := r.e.cfg.Blobs.PutBlob(ctx, f.Data)
			if err != nil {
				return nil, err
			}
			a.ID = id
		}
		out = append(out, a)
	}
	return out, nil
}

// requestApproval pauses the run on a new approval for call.
func (r *runner) requestApproval(ctx context.Context, call ToolCall, tool *AgentTool, canon json.RawMessage) error {
	now := r.e.cfg.Clock.Now().UTC()
	timeout := tool.Approval.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Minute
	}
	a := Approval{
		ID: NewID("apr"), RunID: r.run.ID, SessionID: r.run.SessionID, ToolCallID: call.ID, Tool: call.Name,
		Origin: toolOrigin(tool), Arguments: canon, ArgsSHA256: schema.SHA256(canon), Policy: tool.Approval.Policy,
		RequestedBy: cmp.Or(r.run.StartedBy, r.run.UserID), Status: ApprovalPending, CreatedAt: now, ExpiresAt: now.Add(timeout),
	}
	req := NewEvent(EventApprovalRequested, ApprovalRequested{
		ApprovalID: a.ID, ToolCallID: call.ID, Tool: call.Name, Arguments: canon, ExpiresAt: a.ExpiresAt,
		Origin: a.Origin,
	})
	paused := NewEvent(EventStatus, StatusChange{Status: RunPaused})
	req.CreatedAt, paused.CreatedAt = now, now
	r.endProgress(ProgressPaused)
	run, err := r.e.cfg.Store.PauseRun(ctx, r.run.ID, r.e.cfg.NodeID, a, []Event{req, paused})
	if err != nil {
		return err
	}
	r.e.cfg.Hub.Settled(run)
	return nil
}
