package core

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// JobHandler runs one job; an error retries it with the queue's backoff
// (a PermanentError ends it at once).
type JobHandler func(ctx context.Context, job Job) error

// JobMiddleware wraps the handler of one kind: logging, metrics, recovery.
type JobMiddleware func(kind string, next JobHandler) JobHandler

// JobRouter runs jobs by kind. Each kind has one handler: registering a kind
// twice is an error, reported when the gateway starts rather than found
// when a job of that kind goes to the wrong handler. Every handler runs
// inside the router's middleware, and a panic in one fails its job instead
// of the process.
type JobRouter struct {
	handlers   map[string]JobHandler
	middleware []JobMiddleware
}

// NewJobRouter returns a router whose handlers run inside mw, the first the
// outermost.
func NewJobRouter(mw ...JobMiddleware) *JobRouter {
	return &JobRouter{handlers: map[string]JobHandler{}, middleware: mw}
}

// Handle registers h for kind.
func (r *JobRouter) Handle(kind string, h JobHandler) error {
	if kind == "" || h == nil {
		return fmt.Errorf("jobs: a handler needs a kind and a function (kind %q)", kind)
	}
	if _, dup := r.handlers[kind]; dup {
		return fmt.Errorf("jobs: kind %q is registered twice", kind)
	}
	h = recovered(kind, h) // inside the middleware: it sees a panic as the job's error
	for i := len(r.middleware) - 1; i >= 0; i-- {
		h = r.middleware[i](kind, h)
	}
	r.handlers[kind] = h
	return nil
}

// HandleAll registers every handler of hs (the Handlers() map a component
// returns).
func (r *JobRouter) HandleAll(hs map[string]func(ctx context.Context, job Job) error) error {
	for kind, h := range hs {
		if err := r.Handle(kind, h); err != nil {
			return err
		}
	}
	return nil
}

// Handles reports whether kind has a handler.
func (r *JobRouter) Handles(kind string) bool {
	_, ok := r.handlers[kind]
	return ok
}

// Run runs job with the handler of its kind; ok is false when there is none.
func (r *JobRouter) Run(ctx context.Context, job Job) (err error, ok bool) {
	h, ok := r.handlers[job.Kind]
	if !ok {
		return nil, false
	}
	return h(ctx, job), true
}

// HandleTyped registers h for kind with its payload decoded into a T; a
// payload that does not decode ends the job (it never will).
func HandleTyped[T any](r *JobRouter, kind string, h func(ctx context.Context, job Job, payload T) error) error {
	return r.Handle(kind, func(ctx context.Context, job Job) error {
		var p T
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return Permanent(fmt.Errorf("%s job %s: payload: %w", kind, job.ID, err))
		}
		return h(ctx, job, p)
	})
}

// recovered turns a panic of h into the job's error, with its stack.
func recovered(kind string, h JobHandler) JobHandler {
	return func(ctx context.Context, job Job) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%s job %s panicked: %v\n%s", kind, job.ID, p, debug.Stack())
			}
		}()
		return h(ctx, job)
	}
}

// JobObserver measures jobs by kind; core/metrics implements it.
type JobObserver interface {
	JobDone(kind string, took time.Duration, err error)
}

// JobWaitObserver measures how long due jobs wait for a worker; the
// engine tells its Observer when it implements it (core/metrics does).
type JobWaitObserver interface {
	JobWaited(kind string, waited time.Duration)
}

// LogJobs is middleware that gives a job's handler a logger with its kind,
// id and attempt (JobLogger) and tells o (when not nil) how each job went.
// A failure is logged once, by the engine that retries it.
func LogJobs(log *slog.Logger, o JobObserver) JobMiddleware {
	return func(kind string, next JobHandler) JobHandler {
		return func(ctx context.Context, job Job) error {
			l := log.With("kind", kind, "job", job.ID, "attempt", job.Attempt)
			start := time.Now()
			err := next(context.WithValue(ctx, jobLoggerKey{}, l), job)
			if o != nil {
				o.JobDone(kind, time.Since(start), err)
			}
			return err
		}
	}
}

type jobLoggerKey struct{}

// JobLogger is the logger LogJobs gave the job running in ctx, or fallback.
func JobLogger(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(jobLoggerKey{}).(*slog.Logger); ok {
		return l
	}
	return fallback
}
