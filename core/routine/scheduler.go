package routine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/egress"
)

// RunReader reads runs (core.Store has it).
type RunReader interface {
	GetRun(ctx context.Context, id string) (core.Run, error)
	ListRuns(ctx context.Context, f core.RunFilter) (core.Page[core.Run], error)
}

// Config configures a Scheduler. Store and Runs are required.
type Config struct {
	Store core.RoutineStore
	Runs  RunReader
	// Clock tells the time for due times. Default: the system clock.
	Clock  core.Clock
	Logger *slog.Logger
	// Interval is how often Start looks for due routines. Default 1s.
	Interval time.Duration
	// Alone says that no other process changes the store's routines (the
	// embedded store: one gateway locks its data dir). Start then sleeps
	// until the next routine is due or until a change made through this
	// Scheduler, and Interval only bounds a sleep (a timer's clock stands
	// still while the machine sleeps). Needs a store with NextRoutineDue.
	Alone bool
	// Grace is how late a due time may be noticed and still fire as
	// scheduled. A due time noticed later — the gateway was down — is
	// missed and handled by the routine's missed policy; so is a due time
	// that a later due time overtook before it fired. Default 1m, so a
	// restart within a minute of a due time fires it normally.
	Grace time.Duration
	// HTTPClient posts the webhook deliveries of routines as the config
	// file defines them (the operator chose the URL). Default: a client with
	// a 30s timeout.
	HTTPClient *http.Client
	// Egress guards the webhook deliveries of every other routine: those
	// created through the API (or the CLI), and config routines whose
	// deliver_to was changed through the API. Their connections are checked
	// when dialled (redirects included, no proxy), and their history says
	// only that a delivery failed, never why (the reason is logged): the
	// difference between "refused", "EOF" and a status would map the
	// gateway's network for whoever chose the URL. Default nil: public
	// addresses only (see egress.Policy).
	Egress *egress.Policy
	// DeliveryAttempts is how many times a result delivery is tried (with
	// the queue's backoff) before it is dead-lettered. Default 12.
	DeliveryAttempts int
	// Chat posts results to chat targets (slack:, discord:, telegram:), by
	// target kind. A chat target without one is recorded as not delivered.
	Chat map[string]ChatDeliverer
	// Sessions finds the session of a run, for results of runs asked from a
	// chat conversation (TriggerIn). Default nil: those go to deliver_to only.
	Sessions SessionReader
	// Agents are the defined agents, which routines created or edited
	// through Create and Update must name. Default nil: not checked.
	Agents []string
}

// Scheduler fires due routines, triggers them on demand and handles their
// results. Any number of schedulers (replicas) may share one store: a due
// time fires once, whoever gets there first.
type Scheduler struct {
	cfg     Config
	log     *slog.Logger
	guarded *http.Client  // posts deliveries to URLs the operator did not write
	next    NextDuer      // cfg.Store when Alone
	changed chan struct{} // a routine may be due sooner (Alone)

	mu sync.RWMutex
	// fileDeliverTo is each config routine's deliver_to as the file (the
	// last Sync) says it: a stored value that differs came through the API.
	fileDeliverTo map[string]string
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil || cfg.Runs == nil {
		return nil, errors.New("routine: store and runs are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Minute
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.DeliveryAttempts <= 0 {
		cfg.DeliveryAttempts = 12
	}
	if cfg.Agents != nil {
		cfg.Agents = slices.Sorted(slices.Values(cfg.Agents))
	}
	s := &Scheduler{cfg: cfg, log: cfg.Logger, guarded: cfg.Egress.Client(30 * time.Second), changed: make(chan struct{}, 1)}
	if cfg.Alone {
		next, ok := cfg.Store.(NextDuer)
		if !ok {
			return nil, errors.New("routine: Alone needs a store that tells when the next routine is due (NextRoutineDue)")
		}
		s.next = next
	}
	return s, nil
}

// NextDuer is a routine store that tells when its next enabled routine is
// due (the zero time when none is).
type NextDuer interface {
	NextRoutineDue(ctx context.Context) (time.Time, error)
}

// change tells Start that a routine may be due sooner than it sleeps.
func (s *Scheduler) change() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

const (
	// maxMissedListed is how many missed due times one fire records one by
	// one (the newest); older ones are counted in a note.
	maxMissedListed = 100
	// maxScan bounds the due times walked after a long downtime.
	maxScan = 100_000
	// dueBatch is how many due routines one tick handles.
	dueBatch = 100
)

// Sync stores the routines defined in the config file (see
// core.RoutineStore.SyncRoutines for what a re-sync keeps).
func (s *Scheduler) Sync(ctx context.Context, defs []core.RoutineDef) error {
	now := s.cfg.Clock.Now().UTC()
	defs = slices.Clone(defs)
	for i, d := range defs {
		sched, err := ParseSchedule(d.Schedule, d.Timezone)
		if err != nil {
			return fmt.Errorf("routine %s: %w", d.ID, err)
		}
		if d.Missed == "" {
			defs[i].Missed = core.MissedSkip
		}
		defs[i].NextFireAt = sched.Next(now)
	}
	if err := s.cfg.Store.SyncRoutines(ctx, defs, now); err != nil {
		return fmt.Errorf("sync routines: %w", err)
	}
	s.change()
	file := make(map[string]string, len(defs))
	for _, d := range defs {
		file[d.ID] = d.DeliverTo
	}
	s.mu.Lock()
	s.fileDeliverTo = file
	s.mu.Unlock()
	return nil
}

// operatorTarget reports whether r's deliver_to is the operator's: r is
// defined in the config file and its deliver_to is the file's, not an edit
// made through the API. A scheduler that has not synced knows no file
// values, so it trusts none.
func (s *Scheduler) operatorTarget(r core.Routine) bool {
	if r.Source != core.SourceConfig {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	to, ok := s.fileDeliverTo[r.ID]
	return ok && to == r.DeliverTo
}

// Start ticks every Interval (Alone: when the next routine is due) until
// ctx ends. Tick errors are logged and retried a second later at most.
func (s *Scheduler) Start(ctx context.Context) error {
	timer := time.NewTimer(s.cfg.Interval)
	defer timer.Stop()
	for {
		_, listed, err := s.tick(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("routine tick", "err", err)
		}
		wait := s.cfg.Interval
		if s.next != nil {
			wait = s.untilDue(ctx, wait, err == nil && listed == dueBatch)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.changed:
		}
	}
}

// untilDue is how long Start sleeps when Alone: until the next routine is
// due, at most max. A routine still due after a tick is looked at again at
// once when the tick took a full batch (more may wait), else after a second
// (its fire failed or lost a race; a tick would retry it as often).
func (s *Scheduler) untilDue(ctx context.Context, max time.Duration, full bool) time.Duration {
	at, err := s.next.NextRoutineDue(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("routine next due", "err", err)
		}
		return min(max, time.Second)
	}
	if at.IsZero() {
		return max
	}
	d := at.Sub(s.cfg.Clock.Now())
	switch {
	case d > 0:
		return min(max, d)
	case full:
		return 0
	default:
		return min(max, time.Second)
	}
}

// Tick fires every routine that is due now and returns how many runs it
// created. A routine another scheduler fired first is left alone.
func (s *Scheduler) Tick(ctx context.Context) (int, error) {
	n, _, err := s.tick(ctx)
	return n, err
}

// tick is Tick; it also says how many due routines it listed.
func (s *Scheduler) tick(ctx context.Context) (int, int, error) {
	now := s.cfg.Clock.Now().UTC()
	due, err := s.cfg.Store.DueRoutines(ctx, now, dueBatch)
	if err != nil {
		return 0, 0, fmt.Errorf("due routines: %w", err)
	}
	var errs []error
	fired := 0
	for _, r := range due {
		n, err := s.fire(ctx, r, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("routine %s: %w", r.ID, err))
		}
		fired += n
	}
	return fired, len(due), errors.Join(errs...)
}

// fire plans and commits the fire of a due routine.
func (s *Scheduler) fire(ctx context.Context, r core.Routine, now time.Time) (int, error) {
	sched, err := ParseSchedule(r.Schedule, r.Timezone)
	if err != nil {
		return 0, err
	}
	f := s.plan(r, sched, now)
	if len(f.Runs) > 0 {
		if err := s.holdWhileActive(ctx, r, &f); err != nil {
			return 0, err
		}
	}
	runs, err := s.cfg.Store.FireRoutine(ctx, f)
	if errors.Is(err, core.ErrFireConflict) {
		return 0, nil // another scheduler fired it, or it changed meanwhile
	}
	if err != nil {
		return 0, err
	}
	if n := len(f.Missed) + f.MissedOmitted; n > 0 {
		s.log.Warn("routine missed due times", "routine", r.ID, "missed", n, "policy", r.Missed, "runs", len(runs))
	}
	for _, run := range runs {
		s.log.Info("routine fired", "routine", r.ID, "run", run.ID)
	}
	return len(runs), nil
}

// holdWhileActive turns fire f of routine r into missed due times when a
// run of an earlier fire is still queued, running or waiting for an
// approval: runs would pile up behind it, each to ask again for what the
// first one waits on. The newest missed entry says which run held it.
func (s *Scheduler) holdWhileActive(ctx context.Context, r core.Routine, f *core.RoutineFire) error {
	active, err := s.cfg.Runs.ListRuns(ctx, core.RunFilter{SessionID: SessionID(r),
		Statuses: []core.RunStatus{core.RunQueued, core.RunRunning, core.RunPaused}, ListOptions: core.ListOptions{Limit: 1}})
	if err != nil || len(active.Items) == 0 {
		return err
	}
	a := active.Items[0]
	for _, fr := range f.Runs {
		if fr.Kind == core.FireScheduled { // a catch-up's due time is among the missed already
			f.Missed = append(f.Missed, fr.DueAt)
		}
	}
	f.Runs, f.MissedNote = nil, fmt.Sprintf("not fired: run %s of an earlier fire is still %s", a.ID, a.Status)
	s.log.Info("routine not fired: an earlier run is still active", "routine", r.ID, "run", a.ID, "status", a.Status)
	return nil
}

// plan decides what a fire of due routine r at now does: which due times
// fire, which were missed, and the next due time.
func (s *Scheduler) plan(r core.Routine, sched Schedule, now time.Time) core.RoutineFire {
	expected := *r.NextFireAt
	f := core.RoutineFire{RoutineID: r.ID, Expected: expected, At: now}
	// Walk every due time up to now; keep the newest maxMissedListed+1.
	var dues []time.Time
	total := 0
	t := expected
	for ; !t.IsZero() && !t.After(now) && total < maxScan; t = sched.Next(t) {
		dues = append(dues, t)
		if len(dues) > maxMissedListed+1 {
			dues = dues[1:]
		}
		total++
	}
	if !t.IsZero() && !t.After(now) { // gave up walking: continue from now
		t = sched.Next(now)
	}
	f.Next = t
	latest := dues[len(dues)-1]
	missed, onTime := dues[:len(dues)-1], now.Sub(latest) <= s.cfg.Grace
	if !onTime {
		missed = dues
	}
	f.Missed = missed
	f.MissedOmitted = total - len(dues)
	if len(missed) > 0 && r.Missed == core.MissedOnce {
		f.Runs = append(f.Runs, core.FireRun{Kind: core.FireCatchUp, DueAt: missed[len(missed)-1],
			Run: newRun(r, r.Input, "", now)})
	}
	if onTime {
		f.Runs = append(f.Runs, core.FireRun{Kind: core.FireScheduled, DueAt: latest, Run: newRun(r, r.Input, "", now)})
	}
	return f
}

// SessionID is the session of a routine's runs: one per routine and agent,
// so a routine's runs happen one at a time, in order, and each sees the
// answers of the runs before it (the agent's history_runs).
func SessionID(r core.Routine) string { return r.AgentID + ":routine:" + r.ID }

// chatSessionID is the routine's session for chat conversation b:
// {agent}:routine:{routine}:{platform}:{channel}, and :{thread} in a thread
// (a forum topic, a Slack thread). A session keeps the binding it was
// created with, and the result of a run goes to its session's binding: a
// thread is a conversation of its own, like the agent's chat sessions, so
// each thread's runs answer there and see that thread's earlier runs. An
// id the API could not name (over 128 characters) is a stable hash of it.
func chatSessionID(r core.Routine, b core.Binding) string {
	sid := SessionID(r) + ":" + b.Platform + ":" + b.Channel
	if b.Thread != "" {
		sid += ":" + b.Thread
	}
	return core.SessionIDFor(sid, "routine")
}

// newRun builds the run of one fire. userID "" = the routine itself.
func newRun(r core.Routine, input, userID string, now time.Time) core.NewRun {
	return newRunIn(r, input, userID, core.Binding{}, now)
}

// newRunIn builds the run of one fire in the routine's session, or, for a
// fire asked from a chat conversation (b set), in the routine's session for
// that conversation: its result and approvals go there.
func newRunIn(r core.Routine, input, userID string, b core.Binding, now time.Time) core.NewRun {
	startedBy := userID
	if userID == "" {
		// A scheduled run is asked by whoever wrote what it does: the
		// routine's author through the API, else the routine itself.
		userID = "routine:" + r.ID
		startedBy = cmp.Or(r.ChangedBy, userID)
	}
	sid := SessionID(r)
	if b.Platform != "" {
		sid = chatSessionID(r, b)
	}
	ev := core.NewEvent(core.EventUserMessage, core.UserMessage{Text: input, UserID: userID})
	ev.CreatedAt = now
	return core.NewRun{
		Session: core.Session{ID: sid, AgentID: r.AgentID, UserID: "routine:" + r.ID, Title: "Routine " + r.ID,
			Binding: b, CreatedAt: now, UpdatedAt: now},
		Run: core.Run{ID: core.NewID("run"), SessionID: sid, AgentID: r.AgentID, UserID: userID, StartedBy: startedBy,
			Type: core.RunTypeRoutine, Status: core.RunQueued, RoutineID: r.ID, Input: input, CreatedAt: now},
		Events: []core.Event{ev},
	}
}

// Trigger fires routine id now, whatever its schedule and even when it is
// disabled. extra, when set, is appended to the routine's input; userID
// names who asked ("" = the routine). The run starts at once (after any
// earlier run of the routine that is still active).
func (s *Scheduler) Trigger(ctx context.Context, id, extra, userID string) (core.Run, error) {
	return s.TriggerIn(ctx, core.ManualFire{RoutineID: id, Extra: extra, UserID: userID})
}

// TriggerIn is Trigger with where it was asked from. Asked from a chat
// conversation m.Binding (a slash command), the run's result is posted
// there (and only there), and its approvals are asked there. A run with
// extra input asked for elsewhere (REST, MCP) has a session of its own: in
// the routine's session its input and answer would be the history of
// every scheduled run after it ("from now on, also …"). m.DedupeKey, when set, names
// the command in the platform's inbox: a command delivered again fires
// nothing more (and audits nothing more) and returns the run the first
// delivery started, with a *core.DuplicateError; an API request's key given
// again with another extra input fails with a *core.KeyReusedError. m.Audit
// is recorded in the fire's transaction.
func (s *Scheduler) TriggerIn(ctx context.Context, m core.ManualFire) (core.Run, error) {
	id := m.RoutineID
	r, err := s.cfg.Store.GetRoutine(ctx, id)
	if err != nil {
		return core.Run{}, err
	}
	input, extra := r.Input, strings.TrimSpace(m.Extra)
	if extra != "" {
		input += "\n\n" + extra
	}
	now := s.cfg.Clock.Now().UTC()
	nr := newRunIn(r, input, m.UserID, m.Binding, now)
	if m.Binding.Platform == "" && extra != "" {
		sid := manualSessionID(r.AgentID, id, nr.Run.ID)
		nr.Session.ID, nr.Run.SessionID = sid, sid
	}
	if m.DedupeKey != "" { // a chat command's, or the API's Idempotency-Key
		nr.Platform, nr.DedupeKey = cmp.Or(m.Binding.Platform, "api"), m.DedupeKey
	}
	var audit *core.AuditEntry
	if m.Audit != nil {
		e := *m.Audit
		if e.Detail == "" {
			e.Detail = "run " + nr.Run.ID
		}
		audit = &e
	}
	runs, err := s.cfg.Store.FireRoutine(ctx, core.RoutineFire{RoutineID: id, Manual: true, At: now,
		Runs: []core.FireRun{{Kind: core.FireManual, Run: nr}}, Audit: audit})
	var dup *core.DuplicateError
	if errors.As(err, &dup) {
		s.log.Info("routine trigger delivered again; not fired twice", "routine", id, "run", dup.RunID, "key", m.DedupeKey)
		first, err := s.cfg.Runs.GetRun(ctx, dup.RunID)
		switch {
		case err != nil:
			return core.Run{}, err
		case m.Binding.Platform == "" && !sameExtra(first, id, r.Input, extra):
			return core.Run{}, &core.KeyReusedError{RunID: first.ID}
		}
		return first, dup
	}
	if err != nil {
		return core.Run{}, fmt.Errorf("trigger routine %s: %w", id, err)
	}
	s.log.Info("routine triggered", "routine", id, "run", runs[0].ID, "user", m.UserID)
	return runs[0], nil
}

// manualSessionID is the session of a run asked for outside chat with extra
// input: one of its own.
func manualSessionID(agentID, routineID, runID string) string {
	return core.SessionIDFor(agentID+":routine:"+routineID+":manual:"+runID, "routine")
}

// sameExtra reports whether run, fired by routineID outside chat, was asked
// with extra input extra (trimmed): with extra it has a session of its own
// and its input is the routine's input then, followed by extra. When the
// routine's input (routineInput now) changed since, only the end can be
// compared.
func sameExtra(run core.Run, routineID, routineInput, extra string) bool {
	if (run.SessionID == manualSessionID(run.AgentID, routineID, run.ID)) != (extra != "") {
		return false
	}
	if extra == "" {
		return true
	}
	if strings.HasPrefix(run.Input, routineInput+"\n\n") {
		return run.Input == routineInput+"\n\n"+extra
	}
	return strings.HasSuffix(run.Input, "\n\n"+extra)
}

// Enable switches routine id on; its next due time is the first after now.
// The toggle is stored and outlives restarts until the config file's
// enabled value changes.
func (s *Scheduler) Enable(ctx context.Context, id string) (core.Routine, error) {
	r, err := s.cfg.Store.GetRoutine(ctx, id)
	if err != nil {
		return core.Routine{}, err
	}
	sched, err := ParseSchedule(r.Schedule, r.Timezone)
	if err != nil {
		return core.Routine{}, fmt.Errorf("routine %s: %w", id, err)
	}
	now := s.cfg.Clock.Now().UTC()
	r, err = s.cfg.Store.SetRoutineEnabled(ctx, id, core.RoutineToggle{Enabled: true, NextFireAt: sched.Next(now), At: now})
	if err == nil {
		s.change()
	}
	return r, err
}

// Disable switches routine id off: it fires no more until enabled.
func (s *Scheduler) Disable(ctx context.Context, id string) (core.Routine, error) {
	return s.cfg.Store.SetRoutineEnabled(ctx, id, core.RoutineToggle{Enabled: false, At: s.cfg.Clock.Now().UTC()})
}

// Get returns routine id.
func (s *Scheduler) Get(ctx context.Context, id string) (core.Routine, error) {
	return s.cfg.Store.GetRoutine(ctx, id)
}

// List pages through the routines in id order.
func (s *Scheduler) List(ctx context.Context, f core.RoutineFilter) (core.Page[core.Routine], error) {
	return s.cfg.Store.ListRoutines(ctx, f)
}

// History pages through routine id's history, oldest first. ErrNotFound
// when there is no such routine.
func (s *Scheduler) History(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error) {
	if _, err := s.cfg.Store.GetRoutine(ctx, id); err != nil {
		return core.Page[core.RoutineEntry]{}, err
	}
	return s.cfg.Store.RoutineHistory(ctx, id, o)
}

// check returns s's problems as a *core.InputError naming each field, nil
// when routine id defined by s is fine.
func (s *Scheduler) check(id string, spec Spec) error {
	probs := spec.Problems(id, s.cfg.Agents)
	if len(probs) == 0 {
		return nil
	}
	msgs := make([]string, len(probs))
	for i, p := range probs {
		if p.Field == "" {
			p.Field = "id"
		}
		msgs[i] = p.String()
	}
	return &core.InputError{Msg: strings.Join(msgs, "; ")}
}

// checkEgress refuses a webhook deliver_to sent through the API whose URL
// shows an address the egress policy refuses (169.254.169.254, 127.0.0.1,
// localhost, …): the routine is not stored. A name is checked when a
// delivery dials it.
func (s *Scheduler) checkEgress(deliverTo string) error {
	t, err := ParseTarget(deliverTo)
	if err != nil || t.Kind != TargetWebhook {
		return nil // Problems has said what is wrong with it
	}
	u, err := url.Parse(t.Dest)
	if err != nil {
		return nil
	}
	if err := s.cfg.Egress.CheckHost(u.Hostname()); err != nil {
		return &core.InputError{Msg: fmt.Sprintf("deliver_to: %s is an internal or reserved address (loopback, private, link-local or "+
			"cloud metadata); routines made through the API may deliver there only if egress.allow in the config file lists it", u.Host)}
	}
	return nil
}

// Create stores routine id defined by in (nil fields take the config
// file's defaults) with source api. Problems with in are a
// *core.InputError naming the fields as the config file does; an id that is
// taken is core.ErrRoutineExists.
func (s *Scheduler) Create(ctx context.Context, id string, in core.RoutineSpec) (core.Routine, error) {
	spec := Spec{}.with(in)
	if err := s.check(id, spec); err != nil {
		return core.Routine{}, err
	}
	d := spec.Def(id)
	d.By = in.By
	sched, err := ParseSchedule(d.Schedule, d.Timezone)
	if err != nil {
		return core.Routine{}, &core.InputError{Msg: err.Error()}
	}
	if err := s.checkEgress(d.DeliverTo); err != nil {
		return core.Routine{}, err
	}
	now := s.cfg.Clock.Now().UTC()
	d.NextFireAt = sched.Next(now)
	r, err := s.cfg.Store.CreateRoutine(ctx, d, now)
	if errors.Is(err, core.ErrRoutineExists) {
		if cur, gerr := s.cfg.Store.GetRoutine(ctx, id); gerr == nil && cur.Source == core.SourceConfig {
			return core.Routine{}, fmt.Errorf("%w: %s is defined in the config file; edit it there, or change it with PATCH /api/v1/routines/%s", err, id, id)
		}
		return core.Routine{}, fmt.Errorf("%w: pick another id, or change %s with PATCH /api/v1/routines/%s", err, id, id)
	}
	if err != nil {
		return core.Routine{}, err
	}
	s.change()
	s.log.Info("routine created", "routine", id, "agent", d.AgentID, "schedule", d.Schedule, "enabled", d.Enabled)
	return r, nil
}

// Update changes the fields of routine id set in in and returns it. A new
// schedule or timezone takes the first due time after now under it;
// enabled works as Enable and Disable do. Problems are a *core.InputError,
// as for Create. Edits of a config routine last until the file's
// definition of it changes.
func (s *Scheduler) Update(ctx context.Context, id string, in core.RoutineSpec) (core.Routine, error) {
	cur, err := s.cfg.Store.GetRoutine(ctx, id)
	if err != nil {
		return core.Routine{}, err
	}
	spec := specOf(cur).with(in)
	if err := s.check(id, spec); err != nil {
		return core.Routine{}, err
	}
	d := spec.Def(id)
	sched, err := ParseSchedule(d.Schedule, d.Timezone)
	if err != nil {
		return core.Routine{}, &core.InputError{Msg: err.Error()}
	}
	now := s.cfg.Clock.Now().UTC()
	p := core.RoutinePatch{Enabled: in.Enabled, NextFireAt: sched.Next(now), At: now, By: in.By}
	if in.Agent != nil {
		p.AgentID = &d.AgentID
	}
	if in.Schedule != nil {
		p.Schedule = &d.Schedule
	}
	if in.Timezone != nil {
		p.Timezone = &d.Timezone
	}
	if in.Input != nil {
		p.Input = &d.Input
	}
	if in.DeliverTo != nil {
		next := cur
		next.DeliverTo = d.DeliverTo
		if d.DeliverTo != cur.DeliverTo && !s.operatorTarget(next) { // the file's own value stays the operator's
			if err := s.checkEgress(d.DeliverTo); err != nil {
				return core.Routine{}, err
			}
		}
		p.DeliverTo = &d.DeliverTo
	}
	if in.Missed != nil {
		p.Missed = &d.Missed
	}
	if in.MaxFailures != nil {
		p.MaxFailures = &d.MaxFailures
	}
	if in.Callers != nil {
		p.Callers = &d.Callers
	}
	r, err := s.cfg.Store.UpdateRoutine(ctx, id, p)
	if err != nil {
		return core.Routine{}, err
	}
	s.change()
	s.log.Info("routine updated", "routine", id, "enabled", r.Enabled)
	return r, nil
}

// Delete deletes routine id; its runs and history stay. A routine the
// config file defines is core.ErrConfigRoutine: remove it from the file.
func (s *Scheduler) Delete(ctx context.Context, id string) error {
	cur, err := s.cfg.Store.GetRoutine(ctx, id)
	if err != nil {
		return err
	}
	if cur.Source == core.SourceConfig {
		return fmt.Errorf("%w: remove %s from the file (deleted here it would come back at the next start), or disable it", core.ErrConfigRoutine, id)
	}
	if err := s.cfg.Store.DeleteRoutine(ctx, id); err != nil {
		return err
	}
	s.log.Info("routine deleted", "routine", id)
	return nil
}
