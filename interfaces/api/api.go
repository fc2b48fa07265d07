// Package api is the REST API v1 (JSON and Server-Sent Events) over the run
// engine and the approval service, plus the health and metrics endpoints.
package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/tool/schema"
)

// Config configures the API handler. Engine, Store and Approvals are required.
type Config struct {
	Engine    *core.Engine
	Store     core.Store
	Approvals *approval.Service
	// Keys are the accepted bearer API keys; none = no authentication:
	// every caller is key:local, an admin (the server then listens on
	// loopback only).
	Keys   []Key
	Logger *slog.Logger
	// Metrics is served at /metrics (nil = 404) and Ready answers /readyz;
	// with API keys both need one (any role). server.metrics_addr serves
	// them without a key on another listener (OpsHandler).
	Metrics http.Handler
	// Ready reports whether the gateway can serve (store reachable).
	Ready func(ctx context.Context) error
	// AllowedHosts are Host names the API answers besides the loopback
	// names (see edge); empty with keys = any.
	AllowedHosts []string
	// TrustedOrigins are web origins (https://ops.example.com) whose pages
	// may change state through the API from a browser.
	TrustedOrigins []string
	// MaxWait caps ?wait=true. Default 60s.
	MaxWait time.Duration
	// PollInterval is how often waiting requests re-read the store in case
	// another process changed the run. Default 1s.
	PollInterval time.Duration
	// MaxStreams caps the event streams open at once, MaxStreamsPerKey
	// those of one key (key:local when the API is open); one more answers
	// 429 too_many_streams. Defaults DefaultMaxStreams, DefaultMaxStreamsPerKey.
	MaxStreams, MaxStreamsPerKey int
	// Routines serves /api/v1/routines; nil = no routine routes.
	Routines Routines
	// Jobs is the queue whose dead letters /api/v1/jobs lists and retries
	// (admin); nil = no job routes.
	Jobs core.Queue
	// Extra are more routes by ServeMux pattern (e.g. "POST /slack/events"),
	// outside /api/ and its API keys: they authenticate their own requests.
	Extra map[string]http.Handler
	// Protected are more routes by ServeMux pattern (e.g. "/mcp") behind the
	// API keys, like /api/: Caller tells their handlers who is calling.
	Protected map[string]http.Handler
}

type server struct {
	cfg       Config
	log       *slog.Logger
	refused   refusals
	readiness readiness
	streams   *streams
}

// New returns the HTTP handler with every route.
func New(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	s := &server{cfg: cfg, log: cfg.Logger, streams: newStreams(cfg.MaxStreams, cfg.MaxStreamsPerKey)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", s.ready)
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.edge(s.auth(s.need(approval.RoleViewer, cfg.Metrics.ServeHTTP))))
	}
	api := http.NewServeMux()
	viewer, operator, approver, admin := approval.RoleViewer, approval.RoleOperator, approval.RoleApprover, approval.RoleAdmin
	api.HandleFunc("GET /api/v1/agents", s.need(viewer, s.listAgents))
	api.HandleFunc("POST /api/v1/agents/{agent}/runs", s.need(operator, s.createRun))
	api.HandleFunc("GET /api/v1/runs/{id}", s.need(viewer, s.getRun))
	api.HandleFunc("GET /api/v1/runs/{id}/events", s.need(viewer, s.runEvents))
	api.HandleFunc("POST /api/v1/runs/{id}/cancel", s.need(operator, s.cancelRun))
	api.HandleFunc("GET /api/v1/sessions", s.need(viewer, s.listSessions))
	api.HandleFunc("GET /api/v1/sessions/{id}", s.need(viewer, s.getSession))
	api.HandleFunc("GET /api/v1/sessions/{id}/runs", s.need(viewer, s.sessionRuns))
	api.HandleFunc("GET /api/v1/approvals", s.need(viewer, s.listApprovals))
	api.HandleFunc("GET /api/v1/approvals/{id}", s.need(viewer, s.getApproval))
	api.HandleFunc("POST /api/v1/approvals/{id}/decision", s.need(approver, s.decide))
	api.HandleFunc("GET /api/v1/audit", s.need(admin, s.allAgents(s.listAudit)))
	if cfg.Routines != nil {
		s.routineRoutes(api)
	}
	if cfg.Jobs != nil {
		api.HandleFunc("GET /api/v1/jobs", s.need(admin, s.allAgents(s.listJobs)))
		api.HandleFunc("POST /api/v1/jobs/{id}/retry", s.need(admin, s.allAgents(s.retryJob)))
	}
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s; see README for the API", r.Method, r.URL.Path))
	})
	mux.Handle("/api/", s.edge(s.auth(s.writeLimit(api))))
	for pattern, h := range cfg.Extra {
		mux.Handle(pattern, h)
	}
	for pattern, h := range cfg.Protected {
		mux.Handle(pattern, s.edge(s.auth(h)))
	}
	return mux
}

// writeLimit gives an API answer MaxWait (the longest ?wait=true) plus
// 30s to be written, so a client that stops reading cannot hold it; event
// streams set their own deadline per write.
func (s *server) writeLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if rc.SetWriteDeadline(time.Now().Add(s.cfg.MaxWait+30*time.Second)) == nil {
			defer rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
		}
		next.ServeHTTP(w, r)
	})
}

// ready answers /readyz. Probes need no key; the reason a gateway is not
// ready is told only to a caller with a key (or when the API is open).
func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	_, known := s.key(r)
	serveReady(w, r, &s.readiness, s.cfg.Ready, known || len(s.cfg.Keys) == 0)
}

// readiness runs one readiness check at a time: probes that arrive while
// one runs share its outcome, so a flood of probes costs the store one
// check in flight, and every answer is from a check started after the
// probe arrived.
type readiness struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

func serveReady(w http.ResponseWriter, r *http.Request, c *readiness, ready func(context.Context) error, detail bool) {
	if ready != nil {
		arrived := time.Now()
		c.mu.Lock()
		if !c.at.After(arrived) { // no check started after this request came
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 3*time.Second)
			c.err = ready(ctx)
			cancel()
			c.at = start
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			msg := "not ready"
			if detail {
				msg += ": " + err.Error()
			}
			writeError(w, http.StatusServiceUnavailable, "unavailable", msg)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// OpsHandler serves /metrics, /readyz and /healthz without a key, for
// server.metrics_addr: a listener only the operator's scraper and probes
// reach.
func OpsHandler(metrics http.Handler, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	var c readiness
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { serveReady(w, r, &c, ready, true) })
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

// AgentView is an agent as the API shows it.
type AgentView struct {
	ID          string     `json:"id"`
	Description string     `json:"description"`
	Model       modelView  `json:"model"`
	Tools       []toolView `json:"tools"`
}

type modelView struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

type toolView struct {
	Name             string          `json:"name"`
	Description      string          `json:"description"`
	Parameters       json.RawMessage `json:"parameters"`
	ApprovalRequired bool            `json:"approval_required"`
}

// ViewAgents returns the agents as the API shows them.
func ViewAgents(agents []*core.Agent) []AgentView {
	items := []AgentView{}
	for _, a := range agents {
		v := AgentView{ID: a.ID, Description: a.Description, Model: modelView{Provider: a.Provider, Name: a.ModelName}, Tools: []toolView{}}
		for _, t := range a.Tools {
			v.Tools = append(v.Tools, toolView{Name: t.Spec.Name, Description: t.Spec.Description,
				Parameters: t.Spec.Parameters, ApprovalRequired: t.Approval.Required})
		}
		items = append(items, v)
	}
	return items
}

func (s *server) listAgents(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, core.Page[AgentView]{Items: ViewAgents(s.cfg.Engine.Agents())})
}

// RunView is a run as the API shows it: with its pending approvals.
type RunView struct {
	core.Run
	PendingApprovals []core.Approval `json:"pending_approvals"`
}

// ViewRun returns run with its pending approvals (none unless it is paused).
func ViewRun(ctx context.Context, st core.Store, run core.Run) (RunView, error) {
	v := RunView{Run: run, PendingApprovals: []core.Approval{}}
	if run.Status != core.RunPaused {
		return v, nil
	}
	p, err := st.ListApprovals(ctx, core.ApprovalFilter{RunID: run.ID, Status: core.ApprovalPending})
	if err != nil {
		return v, err
	}
	v.PendingApprovals = p.Items
	return v, nil
}

func (s *server) view(ctx context.Context, run core.Run) (RunView, error) {
	return ViewRun(ctx, s.cfg.Store, run)
}

type createRunRequest struct {
	Input     string `json:"input"`
	SessionID string `json:"session_id"`
	UserID    string `json:"user_id"`
}

func (s *server) createRun(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	if _, ok := s.cfg.Engine.Agent(agent); !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no agent %q; GET /api/v1/agents lists them", agent))
		return
	}
	if !s.agentAllowed(w, r, agent) {
		return
	}
	var req createRunRequest
	if !decode(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Input) == "" {
		writeError(w, http.StatusBadRequest, "bad_request", `input: required, e.g. {"input":"hello"}`)
		return
	}
	if req.SessionID != "" && !core.ValidSessionID(req.SessionID) {
		writeError(w, http.StatusBadRequest, "bad_request", "session_id: use 1-128 letters, digits and _ . : - (or omit it to start a new session)")
		return
	}
	wait, err := boolParam(r, "wait")
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	p := caller(r)
	idem, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	if req.SessionID != "" && !s.sessionAllowed(w, r, req.SessionID) {
		return
	}
	streaming := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if streaming { // a slot before the run exists, so a refusal starts nothing
		release, ok := s.streams.open(w, p.ID)
		if !ok {
			return
		}
		defer release()
	}
	sub := core.SubmitRequest{
		RunID: core.NewID("run"), AgentID: agent, Input: req.Input, SessionID: req.SessionID,
		UserID: cmp.Or(req.UserID, p.ID), StartedBy: p.ID, Type: core.RunTypeAPI,
	}
	if idem != "" { // per key: another key's Idempotency-Key names nothing of this one's
		sub.Platform, sub.DedupeKey = "api", RunDedupeKey(p.ID, idem)
	}
	// Listen before the run exists, so its first streamed words are not
	// missed; a request that only waits hears changes, not every word.
	subscribe := s.cfg.Engine.Hub().SubscribeChanges
	if streaming {
		subscribe = s.cfg.Engine.Hub().Subscribe
	}
	updates, unsub := subscribe(sub.RunID)
	defer func() { unsub() }()
	run, err := s.cfg.Engine.Submit(r.Context(), sub)
	if dup, ok := errors.AsType[*core.DuplicateError](err); ok && dup.RunID != "" {
		// A retry of a request that made its run: answer with that run.
		unsub()
		updates, unsub = subscribe(dup.RunID)
		if run, err = Replay(r.Context(), s.cfg.Store, dup, agent, req.Input); err == nil {
			w.Header().Set("Idempotent-Replayed", "true")
		}
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	if streaming {
		s.streamFrom(w, r, run.ID, 0, updates)
		return
	}
	status := http.StatusAccepted
	if wait {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.MaxWait)
		defer cancel()
		run, err = s.waitRun(ctx, run, updates)
		if err != nil && ctx.Err() == nil {
			s.fail(w, err)
			return
		}
		if settled(run.Status) {
			status = http.StatusOK
		}
	}
	s.writeRun(w, r, status, run)
}

// idempotencyKey is the request's Idempotency-Key header ("" when none):
// a retried POST with the same key (from the same API key) answers with
// the run the first one made instead of starting another. ok is false
// when a bad key was answered.
func idempotencyKey(w http.ResponseWriter, r *http.Request) (key string, ok bool) {
	key = r.Header.Get("Idempotency-Key")
	if key != "" && !ValidIdempotencyKey(key) {
		writeError(w, http.StatusBadRequest, "bad_request", "Idempotency-Key: "+IdempotencyKeyRule)
		return "", false
	}
	return key, true
}

// IdempotencyKeyRule says what an idempotency key may be (REST's
// Idempotency-Key header, MCP's idempotency_key argument).
const IdempotencyKeyRule = "use 1-255 visible ASCII characters, e.g. a UUID"

// ValidIdempotencyKey reports whether key follows IdempotencyKeyRule.
func ValidIdempotencyKey(key string) bool {
	return key != "" && len(key) <= 255 && strings.IndexFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) < 0
}

// Replay is the run a retried request answers with: the one dup names,
// which a request with the same idempotency key started. When that run was
// asked of another agent or with another input, the key was used again for
// another request, which is refused (*core.KeyReusedError), not answered
// with it.
func Replay(ctx context.Context, st interface {
	GetRun(context.Context, string) (core.Run, error)
}, dup *core.DuplicateError, agent, input string) (core.Run, error) {
	run, err := st.GetRun(ctx, dup.RunID)
	if err == nil && (run.AgentID != agent || run.Input != input) {
		return core.Run{}, &core.KeyReusedError{RunID: run.ID}
	}
	return run, err
}

// RunDedupeKey and TriggerDedupeKey are the inbox keys (platform "api")
// of principal's idempotency key for a run of an agent, and for a trigger
// of routine id: per principal, so another key's same value names nothing
// of this one's; REST and MCP share them.
func RunDedupeKey(principal, key string) string { return principal + ":run:" + key }

// TriggerDedupeKey: see RunDedupeKey.
func TriggerDedupeKey(principal, id, key string) string {
	return principal + ":trigger:" + id + ":" + key
}

// settled: the run will not move without a decision or a new input.
func settled(st core.RunStatus) bool { return st.Terminal() || st == core.RunPaused }

// waitRun returns run (as just created, subscribed to updates before
// that) once it is settled or ctx ends, with the latest state. It reads the
// run again only when it may have settled: on a change whose status is
// unknown or settled, or at a poll.
func (s *server) waitRun(ctx context.Context, run core.Run, updates <-chan core.Update) (core.Run, error) {
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		if settled(run.Status) {
			return run, nil
		}
		held, err := waitChange(ctx, updates, tick.C)
		if err != nil {
			return run, err
		}
		if held != nil {
			run = *held // the engine's finish or pause: no need to read it back
			continue
		}
		if run, err = s.cfg.Store.GetRun(context.WithoutCancel(ctx), run.ID); err != nil {
			return run, err
		}
	}
}

// waitChange returns when the run changed in a way that may have settled
// it (a change to a status that is not settled does not count), at the
// next poll tick, or with ctx's error. It returns the run when the update
// carries it settled.
func waitChange(ctx context.Context, updates <-chan core.Update, tick <-chan time.Time) (*core.Run, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case u := <-updates:
			if u.Changed && u.Run != nil && settled(u.Run.Status) {
				return u.Run, nil
			}
			if u.Changed && (u.Status == "" || settled(u.Status)) {
				return nil, nil
			}
		case <-tick:
			return nil, nil
		}
	}
}

func (s *server) writeRun(w http.ResponseWriter, r *http.Request, status int, run core.Run) {
	v, err := s.view(r.Context(), run)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, status, v)
}

func (s *server) getRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	s.writeRun(w, r, http.StatusOK, run)
}

// loadRun reads run id for a caller who may see its agent.
func (s *server) loadRun(w http.ResponseWriter, r *http.Request, id string) (core.Run, bool) {
	run, err := s.cfg.Store.GetRun(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return run, false
	}
	return run, s.agentAllowed(w, r, run.AgentID)
}

// sessionAllowed checks that a session, when it exists, is of an agent the
// caller may use and not a chat conversation (ChatSession), and that it is
// not named as the gateway names its own (GatewaySession).
func (s *server) sessionAllowed(w http.ResponseWriter, r *http.Request, id string) bool {
	ses, err := s.cfg.Store.GetSession(r.Context(), id)
	switch {
	case errors.Is(err, core.ErrNotFound):
	case err != nil:
		s.fail(w, err)
		return false
	case !s.agentAllowed(w, r, ses.AgentID):
		return false
	}
	if why := cmp.Or(ChatSession(ses), GatewaySession(id)); why != "" {
		writeError(w, http.StatusConflict, "chat_session", why)
		return false
	}
	return true
}

// GatewaySession says why a run started through the API or MCP may not be
// in session id, "" when it may: the gateway names chat conversations' and
// routines' sessions itself. A session keeps the binding it was created
// with: made first through the API, it would take that conversation's
// place (its history, and its approvals no longer decided from the chat);
// a routine's history is what its runs answered.
func GatewaySession(id string) string {
	if !core.GatewaySessionID(id) {
		return ""
	}
	return fmt.Sprintf("session_id: %s is named as the gateway names a chat conversation's or a routine's session; those start from the chat or the routine (omit session_id, or choose another)", id)
}

// ChatSession says why a run started through the API or MCP may not join
// session ses, "" when it may: a chat conversation's runs start from the
// chat, since their approvals are posted there and decided by the
// conversation's members, and their history is what the chat said.
func ChatSession(ses core.Session) string {
	if ses.Binding.Platform == "" {
		return ""
	}
	return fmt.Sprintf("session_id: session %s is a %s conversation; its runs start from %s (omit session_id to start a new session)",
		ses.ID, ses.Binding.Platform, ses.Binding.Platform)
}

func (s *server) runEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := intParam(r, "after", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if _, ok := s.loadRun(w, r, id); !ok {
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		if last := r.Header.Get("Last-Event-ID"); last != "" {
			if n, err := strconv.ParseInt(last, 10, 64); err == nil {
				after = n
			}
		}
		s.stream(w, r, id, after)
		return
	}
	limit, err := intParam(r, "limit", 500)
	if err != nil || limit < 1 || limit > 5000 {
		writeError(w, http.StatusBadRequest, "bad_request", "limit: must be a number from 1 to 5000")
		return
	}
	evs, err := s.cfg.Store.Events(r.Context(), id, after, int(limit))
	if err != nil {
		s.fail(w, err)
		return
	}
	page := core.Page[core.Event]{Items: evs}
	if page.Items == nil {
		page.Items = []core.Event{}
	}
	if len(evs) == int(limit) {
		page.NextCursor = strconv.FormatInt(evs[len(evs)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, page)
}

// stream sends the run's journal entries after seq `after` as SSE (event: the
// entry type, id: its seq), live text as `delta` events, and ends with a
// `run` event once the run is settled.
func (s *server) stream(w http.ResponseWriter, r *http.Request, id string, after int64) {
	release, ok := s.streams.open(w, caller(r).ID)
	if !ok {
		return
	}
	defer release()
	updates, unsub := s.cfg.Engine.Hub().Subscribe(id)
	defer unsub()
	s.streamFrom(w, r, id, after, updates)
}

// streamFrom is stream over a subscription the caller made (before the run
// started, so no streamed text is missed).
func (s *server) streamFrom(w http.ResponseWriter, r *http.Request, id string, after int64, updates <-chan core.Update) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	// Each write may take streamWriteTimeout; the stream as long as it lasts.
	rc := http.NewResponseController(w)
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	deadline()
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	ctx := r.Context()
	for {
		deadline()
		evs, err := s.cfg.Store.Events(ctx, id, after, 0)
		if err != nil {
			writeSSE(w, "error", "", map[string]any{"code": "internal", "message": err.Error()})
			return
		}
		for _, ev := range evs {
			writeSSE(w, string(ev.Type), strconv.FormatInt(ev.Seq, 10), ev)
			after = ev.Seq
		}
		run, err := s.cfg.Store.GetRun(ctx, id)
		if err != nil {
			writeSSE(w, "error", "", map[string]any{"code": "internal", "message": err.Error()})
			return
		}
		if settled(run.Status) && run.LastSeq <= after {
			// Text streamed before this stream caught up still goes out
			// (a fast run can settle before the stream first looks).
			for pending := true; pending; {
				select {
				case u := <-updates:
					if u.Delta != "" {
						writeSSE(w, "delta", "", map[string]string{"text": u.Delta})
					}
				default:
					pending = false
				}
			}
			if v, err := s.view(ctx, run); err == nil {
				writeSSE(w, "run", "", v)
			}
			flusher.Flush()
			return
		}
		flusher.Flush()
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case u := <-updates:
				if u.Delta != "" {
					deadline()
					writeSSE(w, "delta", "", map[string]string{"text": u.Delta})
					flusher.Flush()
					continue
				}
				waiting = false
			case <-tick.C:
				waiting = false
			}
		}
	}
}

func writeSSE(w io.Writer, event, id string, v any) {
	b, _ := json.Marshal(v) // our own views always marshal
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

type cancelRequest struct {
	Reason string `json:"reason"`
	// By is accepted for older clients and ignored: who cancels is the key.
	By string `json:"by"`
}

// cancelRun cancels a run: operators cancel the runs they started, admins
// any run.
func (s *server) cancelRun(w http.ResponseWriter, r *http.Request) {
	var req cancelRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	p := caller(r)
	run, ok := s.loadRun(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	if p.Role < approval.RoleAdmin && run.StartedBy != p.ID {
		s.forbidden(w, r, p, fmt.Sprintf("run %s was started by %s; an operator cancels only its own runs (admin cancels any)", run.ID, cmp.Or(run.StartedBy, "someone else")))
		return
	}
	run, err := s.cfg.Engine.Cancel(r.Context(), run.ID, core.Cancel{By: p.ID, Reason: req.Reason,
		Audit: &core.AuditEntry{Principal: p.ID, Route: p.Route, Action: core.AuditCancel, Target: run.ID, Detail: req.Reason}})
	if errors.Is(err, core.ErrRunFinished) {
		writeJSON(w, http.StatusConflict, map[string]any{"error": errBody{Code: "run_finished",
			Message: fmt.Sprintf("run is already %s", run.Status)}, "status": run.Status})
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	s.writeRun(w, r, http.StatusOK, run)
}

func (s *server) listSessions(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	page, err := s.cfg.Store.ListSessions(r.Context(), core.SessionFilter{
		UserID: q.Get("user_id"), AgentID: q.Get("agent_id"), AgentIDs: caller(r).Agents, ListOptions: opts,
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(page))
}

func (s *server) getSession(w http.ResponseWriter, r *http.Request) {
	ses, err := s.cfg.Store.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if !s.agentAllowed(w, r, ses.AgentID) {
		return
	}
	writeJSON(w, http.StatusOK, ses)
}

func (s *server) sessionRuns(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	ses, err := s.cfg.Store.GetSession(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	if !s.agentAllowed(w, r, ses.AgentID) {
		return
	}
	page, err := s.cfg.Store.ListRuns(r.Context(), core.RunFilter{SessionID: id, ListOptions: opts})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(page))
}

func (s *server) listApprovals(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	st := core.ApprovalStatus(q.Get("status"))
	switch {
	case st == "all": // as the CLI and MCP say it; omitted means the same
		st = ""
	case st != "" && !st.Valid():
		writeError(w, http.StatusBadRequest, "bad_request", "status: must be one of pending, approved, denied, expired, cancelled, all")
		return
	}
	page, err := s.cfg.Store.ListApprovals(r.Context(), core.ApprovalFilter{
		Status: st, RunID: q.Get("run_id"), AgentIDs: caller(r).Agents, ListOptions: opts,
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(page))
}

func (s *server) getApproval(w http.ResponseWriter, r *http.Request) {
	a, err := s.cfg.Store.GetApproval(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if _, ok := s.loadRun(w, r, a.RunID); !ok {
		return
	}
	writeJSON(w, http.StatusOK, a)
}

type decisionRequest struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// DecidedBy and Via are accepted for older clients and ignored: the
	// decider is the key the request carries, the route is api (cli for
	// the agentgate CLI).
	DecidedBy string `json:"decided_by"`
	Via       string `json:"via"`
	// ArgsSHA256 binds the decision to the arguments the decider saw.
	ArgsSHA256 string `json:"args_sha256"`
}

func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	var req decisionRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Decision != "approve" && req.Decision != "deny" {
		writeError(w, http.StatusBadRequest, "bad_request", `decision: must be "approve" or "deny"`)
		return
	}
	a, err := s.cfg.Approvals.Decide(r.Context(), r.PathValue("id"), approval.Request{
		Approve: req.Decision == "approve", Principal: caller(r), Reason: req.Reason, ArgsSHA256: req.ArgsSHA256,
	})
	var np *core.NotPendingError
	var na *approval.NotAllowedError
	switch {
	case errors.As(err, &np):
		writeJSON(w, http.StatusConflict, map[string]any{
			"error":  errBody{Code: "approval_not_pending", Message: fmt.Sprintf("approval is already %s; nothing was changed", np.Status)},
			"status": np.Status, "approval": a,
		})
	case errors.As(err, &na):
		writeError(w, http.StatusForbidden, "not_allowed", na.Error())
	case errors.Is(err, core.ErrArgsMismatch):
		writeError(w, http.StatusConflict, "args_mismatch", "the approval's arguments differ from the ones you were shown (args_sha256); reload it")
	case err != nil:
		s.fail(w, err)
	default:
		writeJSON(w, http.StatusOK, a)
	}
}

// listAudit serves GET /api/v1/audit: newest first, filtered by principal,
// action, target, route and since (RFC 3339).
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := core.AuditFilter{Principal: q.Get("principal"), Action: q.Get("action"), Target: q.Get("target"), Route: q.Get("route"), ListOptions: opts}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "since: must be an RFC 3339 time like 2026-12-03T09:00:00Z")
			return
		}
		f.Since = t
	}
	page, err := s.cfg.Store.ListAudit(r.Context(), f)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(page))
}

// fail maps an error to a response.
func (s *server) fail(w http.ResponseWriter, err error) {
	var ie *core.InputError
	var reused *core.KeyReusedError
	switch {
	case errors.Is(err, core.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.As(err, &ie):
		writeError(w, http.StatusBadRequest, "bad_request", ie.Msg)
	case errors.Is(err, core.ErrInvalidCursor):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.As(err, &reused):
		writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", reused.Named("Idempotency-Key"))
	case errors.Is(err, core.ErrSessionAgent):
		writeError(w, http.StatusConflict, "session_agent_mismatch", "the session belongs to another agent; start a new session or use that agent")
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "cancelled", "request cancelled")
	default:
		s.log.Error("api request failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the gateway could not complete the request; nothing was changed, try again: "+err.Error())
	}
}

type errBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]errBody{"error": {Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client went away; nothing to do
}

// MaxBody is the largest request body the API reads.
const MaxBody = 1 << 20

// decode reads a JSON body: exactly one JSON object, at most MaxBody, no
// unknown fields. Otherwise it writes a 400 (413 when too large).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err == nil {
		err = repeatedKey(body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errTrailing
			if _, ok := errors.AsType[*http.MaxBytesError](terr); ok {
				err = terr
			}
		}
	}
	if err == nil {
		return true
	}
	msg := "body: must be a JSON object: " + err.Error()
	switch {
	case errors.Is(err, io.EOF):
		msg = "body: required (a JSON object)"
	case errors.Is(err, errTrailing):
		msg = "body: must hold exactly one JSON object; found more after it"
	case errors.Is(err, errRepeatedKey):
		msg = "body: " + err.Error()
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body: larger than %d bytes; send less", MaxBody))
		return false
	}
	writeError(w, http.StatusBadRequest, "bad_request", msg)
	return false
}

var errTrailing = errors.New("trailing data after the JSON value")

var errRepeatedKey = errors.New("a key appears twice in one object")

// repeatedKey refuses a body whose objects name a key twice, as decoding
// matches keys to fields: ignoring case. Decoding would keep the last
// value where another reader (a proxy's log, an audit) may keep the first,
// so {"decision":"deny","Decision":"approve"} would read as a deny there
// and approve here. Syntax errors are left to the decoding.
func repeatedKey(data []byte) error {
	type frame struct {
		keys map[string]bool // nil in an array
		key  bool            // an object's next token is a key
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if n := len(stack); n > 0 && stack[n-1].key {
			if k, ok := tok.(string); ok {
				f := schema.FoldKey(k)
				if stack[n-1].keys[f] {
					return fmt.Errorf("%w: %q (keys match ignoring case); send each once", errRepeatedKey, k)
				}
				stack[n-1].keys[f], stack[n-1].key = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil { // a value ended
			stack[n-1].key = true
		}
	}
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: must be true or false", name)
	}
	return b, nil
}

func intParam(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: must be a non-negative whole number", name)
	}
	return n, nil
}

func listOptions(w http.ResponseWriter, r *http.Request) (core.ListOptions, bool) {
	limit, err := intParam(r, "limit", 50)
	if err != nil || limit < 1 || limit > 500 {
		writeError(w, http.StatusBadRequest, "bad_request", "limit: must be a number from 1 to 500")
		return core.ListOptions{}, false
	}
	return core.ListOptions{Limit: int(limit), Cursor: r.URL.Query().Get("cursor")}, true
}

func nonNil[T any](p core.Page[T]) core.Page[T] {
	if p.Items == nil {
		p.Items = []T{}
	}
	return p
}
