package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"time"
)

// Routines are standing agent jobs: a schedule (cron or @every) fires runs of
// type routine with the routine's input; a person may also trigger one at
// any time. The scheduling logic lives in package core/routine; the state
// lives in a RoutineStore.

// ErrFireConflict: FireRoutine's compare-and-set failed. Another scheduler
// (or replica) fired the due time first, or the routine was disabled or
// rescheduled meanwhile. The caller drops its fire; nothing was written.
var ErrFireConflict = errors.New("routine fire conflict: next fire time moved")

// ErrRoutineExists: CreateRoutine was given an id that is taken.
var ErrRoutineExists = errors.New("routine already exists")

// ErrConfigRoutine: the routine is defined in the config file, so it cannot
// be deleted through the API (the next start would bring it back).
var ErrConfigRoutine = errors.New("routine is defined in the config file")

// RoutineSource says where a routine is defined.
type RoutineSource string

// Routine sources.
const (
	// SourceConfig: the config file defines the routine. SyncRoutines
	// creates, updates and deletes it.
	SourceConfig RoutineSource = "config"
	// SourceAPI: created through the API (or CLI). SyncRoutines leaves it
	// alone unless the file comes to define the same id, which takes it over.
	SourceAPI RoutineSource = "api"
)

// MissedPolicy says what a routine does with due times that passed while no
// scheduler ran (the gateway was down).
type MissedPolicy string

// Missed policies. Both record every missed due time in the history.
const (
	// MissedSkip fires nothing for missed due times; the routine continues
	// with its next due time after now.
	MissedSkip MissedPolicy = "skip"
	// MissedOnce fires exactly one catch-up run for all missed due times,
	// then continues with the schedule.
	MissedOnce MissedPolicy = "once"
)

// Valid reports whether p is a known policy.
func (p MissedPolicy) Valid() bool { return p == MissedSkip || p == MissedOnce }

// FireKind says why a routine history entry exists.
type FireKind string

// History entry kinds.
const (
	FireScheduled FireKind = "scheduled" // a due time fired on time
	FireCatchUp   FireKind = "catch_up"  // the one run for missed due times (policy once)
	FireManual    FireKind = "manual"    // triggered through the API, CLI or chat
	FireMissed    FireKind = "missed"    // a due time that passed while no scheduler ran; no run
)

// RoutineFilter selects routines. Empty fields match everything.
type RoutineFilter struct {
	// AgentIDs, when not empty, keeps the routines of these agents only.
	AgentIDs []string
	ListOptions
}

// Routine is a scheduled agent job and its scheduling state.
type Routine struct {
	ID      string `json:"id"`
	AgentID string `json:"agent_id"`
	// Source is where the routine is defined: config or api.
	Source RoutineSource `json:"source"`
	// Schedule is a 5-field cron expression, a descriptor (@hourly, @daily,
	// @weekly, @monthly, @yearly) or @every <duration>.
	Schedule string `json:"schedule"`
	// Timezone is the IANA zone the schedule is read in.
	Timezone string `json:"timezone"`
	Input    string `json:"input"`
	// DeliverTo is where run results go: webhook:<url>, slack:<channel>,
	// discord:<channel>, telegram:<chat> or none.
	DeliverTo string `json:"deliver_to"`
	Enabled   bool   `json:"enabled"`
	// ConfigEnabled is the config file's enabled value as last synced. A
	// toggle through the API wins until the file's value itself changes.
	ConfigEnabled bool         `json:"config_enabled"`
	Missed        MissedPolicy `json:"missed"`
	// MaxFailures is how many consecutive failed runs disable the routine;
	// 0 = never.
	MaxFailures int `json:"max_failures"`
	// Callers limit who may trigger the routine on demand (people, platform
	// ids, groups, key roles, channels; see the README); empty = keys with
	// the operator role and up, no chat user. Schedules fire whatever it says.
	Callers []string `json:"callers"`
	// NextFireAt is the next due time; nil when disabled or when the
	// schedule has no further time.
	NextFireAt          *time.Time `json:"next_fire_at"`
	LastFireAt          *time.Time `json:"last_fire_at"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	// DisabledReason is set when the routine disabled itself (failure budget).
	DisabledReason string `json:"disabled_reason"`
	// ChangedBy is the principal that made the routine, or last changed it,
	// through the API; "" when the config file's definition stands. It is
	// the requester of the scheduled runs, so that a tool's
	// exclude_requester keeps whoever wrote what they do from approving it.
	ChangedBy string    `json:"changed_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Redacted is r as callers below admin see it: a webhook's URL, whose path
// and query often carry the secret that lets anyone post there, is cut to
// its scheme and host.
func (r Routine) Redacted() Routine {
	rest, ok := strings.CutPrefix(r.DeliverTo, "webhook:")
	if !ok {
		return r
	}
	if u, err := url.Parse(rest); err == nil && u.Host != "" {
		r.DeliverTo = "webhook:" + u.Scheme + "://" + u.Host + "/…"
	} else {
		r.DeliverTo = "webhook:…"
	}
	return r
}

// RoutineEntry is one line of a routine's history: a fire (with its run), a
// manual trigger or a missed due time.
type RoutineEntry struct {
	RoutineID string   `json:"routine_id"`
	Kind      FireKind `json:"kind"`
	// DueAt is the schedule time this entry is for; nil for manual fires.
	DueAt *time.Time `json:"due_at"`
	// FiredAt is when the entry was recorded (the run was created).
	FiredAt time.Time `json:"fired_at"`
	RunID   string    `json:"run_id,omitempty"`
	// RunStatus is the run's current status (read from the run).
	RunStatus RunStatus `json:"run_status,omitempty"`
	// DisabledRoutine: this run's failure disabled the routine.
	DisabledRoutine bool `json:"disabled_routine,omitempty"`
	// Delivery says what happened to the run's result, per destination
	// ("; "-separated): none, delivered (to slack:<channel>, …), not
	// delivered (the chat interface is not configured), retrying or failed
	// with the reason.
	Delivery string `json:"delivery,omitempty"`
	Note     string `json:"note,omitempty"`
}

// RoutineDef is a routine as the config file defines it (the input of
// SyncRoutines).
type RoutineDef struct {
	ID          string
	AgentID     string
	Schedule    string
	Timezone    string
	Input       string
	DeliverTo   string
	Enabled     bool
	Missed      MissedPolicy
	MaxFailures int
	Callers     []string
	// NextFireAt is the first due time after the sync; the store uses it when
	// the routine is new, its schedule or timezone changed, it becomes
	// enabled by this sync, or it has no next fire time. Zero = none.
	NextFireAt time.Time
	// By is the principal creating it through the API (Routine.ChangedBy).
	By string
}

// ConfigHash fingerprints the definition fields of d (not ID, Enabled or
// NextFireAt). SyncRoutines stores the file's hash to tell whether the
// file's definition of a routine changed since the last sync.
func (d RoutineDef) ConfigHash() string {
	fields := []any{d.AgentID, d.Schedule, d.Timezone, d.Input, d.DeliverTo, d.Missed, d.MaxFailures}
	if len(d.Callers) > 0 { // routines synced before callers existed keep their hash
		fields = append(fields, d.Callers)
	}
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// RoutineSpec is a routine definition as sent to the API: the fields of a
// routine in the config file, by the same names. A nil field is the
// default when creating and unchanged when editing.
type RoutineSpec struct {
	Agent     *string `json:"agent,omitempty"`
	Schedule  *string `json:"schedule,omitempty"`
	Timezone  *string `json:"timezone,omitempty"`
	Input     *string `json:"input,omitempty"`
	DeliverTo *string `json:"deliver_to,omitempty"`
	// Enabled defaults to true; editing it is the same as enable/disable.
	Enabled *bool   `json:"enabled,omitempty"`
	Missed  *string `json:"missed,omitempty"`
	// MaxFailures: 0 = the default 5, -1 = never disable, as in the file.
	MaxFailures *int `json:"max_failures,omitempty"`
	// Callers: who may trigger it on demand; [] = keys only.
	Callers *[]string `json:"callers,omitempty"`
	// By is the principal sending it (the API's caller), not read from JSON.
	By string `json:"-"`
}

// RoutinePatch is the input of UpdateRoutine: each non-nil field replaces
// the stored one.
type RoutinePatch struct {
	AgentID     *string
	Schedule    *string
	Timezone    *string
	Input       *string
	DeliverTo   *string
	Missed      *MissedPolicy
	MaxFailures *int // as stored: 0 = never
	Callers     *[]string
	// Enabled toggles the routine as SetRoutineEnabled does (stored, wins
	// until the file's enabled value changes).
	Enabled *bool
	// NextFireAt is the first due time after At under the patched schedule.
	// It becomes next_fire_at when the routine is (or becomes) enabled and
	// the patch changes its schedule or timezone, enables it, or it has no
	// next fire time. Zero = none.
	NextFireAt time.Time
	At         time.Time
	// By, when set, becomes the routine's ChangedBy.
	By string
}

// RoutineToggle is the input of SetRoutineEnabled.
type RoutineToggle struct {
	Enabled bool
	// NextFireAt is the first due time after now, used when the routine goes
	// from disabled to enabled. Zero = none.
	NextFireAt time.Time
	// Reason is stored as DisabledReason when disabling.
	Reason string
	At     time.Time
}

// RoutineFire is the input of FireRoutine.
type RoutineFire struct {
	RoutineID string
	// Manual fires skip the compare-and-set and leave the schedule alone;
	// they work on disabled routines too.
	Manual bool
	// Expected is the next_fire_at the caller read. The fire happens only if
	// the routine is enabled and still has it (compare-and-set), else
	// ErrFireConflict.
	Expected time.Time
	// Next becomes next_fire_at; zero = no further fire.
	Next time.Time
	At   time.Time
	// Missed due times are recorded as missed entries, oldest first.
	Missed []time.Time
	// MissedOmitted counts missed due times older than Missed that are not
	// listed; it is noted on the oldest missed entry.
	MissedOmitted int
	// MissedNote, when set, is noted on the newest missed entry: why it
	// did not fire.
	MissedNote string
	// Runs are created in order, each with its history entry.
	Runs []FireRun
	// Audit, when set, is recorded in the fire's transaction (At defaults
	// to f.At): a trigger is audited exactly when it fired.
	Audit *AuditEntry
}

// ManualFire is an on-demand fire of a routine (routine.Scheduler.TriggerIn).
type ManualFire struct {
	RoutineID string
	// Extra is appended to the routine's input.
	Extra string
	// UserID is who asked; the run is theirs.
	UserID string
	// Binding, when set, is the conversation the result goes to as well.
	Binding Binding
	// DedupeKey names a chat command or an API request's idempotency key: a
	// command delivered again, or a request retried, returns the run it
	// created instead of firing again. A request retried with the same key
	// and another Extra fails with a *KeyReusedError.
	DedupeKey string
	// Audit is recorded with the fire (its Detail names the run when empty).
	Audit *AuditEntry
}

// FireRun is one run a fire creates.
type FireRun struct {
	Kind  FireKind
	DueAt time.Time // zero for manual fires
	Run   NewRun    // as for Store.CreateRun
}

// RoutineSettle is the input of SettleRoutineRun.
type RoutineSettle struct {
	RunID  string
	Status RunStatus
	At     time.Time
	// DisableReason is stored when this outcome exhausts the failure budget.
	DisableReason string
}

// RoutineStore is the durable state of routines: definitions synced from
// the config file or made through the API, their scheduling state and history. Fires create their
// runs exactly like Store.CreateRun (session, run, first events and a JobRun
// job), in the same transaction as the history entry.
type RoutineStore interface {
	// SyncRoutines makes the stored config routines match defs: new
	// routines are created (source config, enabled = def.Enabled), existing
	// ones updated, and config routines not in defs deleted (their history
	// stays). Routines with source api are left alone, unless defs has their
	// id: then the file takes them over (source config, the file's
	// definition and enabled value).
	//
	// A stored enabled value (a toggle through the API) is kept unless
	// def.Enabled differs from the file value of the previous sync, in which
	// case the file wins. Likewise the stored definition (edited through the
	// API) is kept unless def.ConfigHash differs from the hash of the
	// previous sync. The stored next fire time is kept unless the schedule
	// or timezone changed or the routine became enabled, so due times missed
	// while the gateway was down are still seen.
	SyncRoutines(ctx context.Context, defs []RoutineDef, at time.Time) error
	// CreateRoutine stores a new routine with source api (enabled =
	// d.Enabled; next_fire_at = d.NextFireAt when enabled).
	// ErrRoutineExists when the id is taken, whatever its source.
	CreateRoutine(ctx context.Context, d RoutineDef, at time.Time) (Routine, error)
	// UpdateRoutine applies p to routine id in one transaction and returns
	// it. Enabling clears the failure count and reason; disabling clears
	// next_fire_at and the reason. ErrNotFound when there is no such routine.
	UpdateRoutine(ctx context.Context, id string, p RoutinePatch) (Routine, error)
	// DeleteRoutine deletes routine id, whatever its source; its history
	// stays. ErrNotFound when there is no such routine.
	DeleteRoutine(ctx context.Context, id string) error
	GetRoutine(ctx context.Context, id string) (Routine, error)
	// ListRoutines pages through routines in id order.
	ListRoutines(ctx context.Context, f RoutineFilter) (Page[Routine], error)
	// DueRoutines lists up to limit (0 = all) enabled routines with
	// next_fire_at <= now, earliest first.
	DueRoutines(ctx context.Context, now time.Time, limit int) ([]Routine, error)
	// SetRoutineEnabled enables or disables a routine. Enabling a disabled
	// routine sets next_fire_at to t.NextFireAt and clears the failure count
	// and reason; disabling clears next_fire_at and stores t.Reason. A
	// routine already in the asked state is returned unchanged.
	SetRoutineEnabled(ctx context.Context, id string, t RoutineToggle) (Routine, error)
	// FireRoutine, in one transaction: moves next_fire_at from f.Expected to
	// f.Next (unless manual; ErrFireConflict when the routine is disabled or
	// next_fire_at is no longer f.Expected), records the missed due times and
	// creates each run with its history entry and JobRun job. It returns the
	// created runs. ErrNotFound when there is no such routine.
	FireRoutine(ctx context.Context, f RoutineFire) ([]Run, error)
	// RoutineHistory pages through a routine's entries in the order they were
	// recorded. It works for deleted routines too (empty page).
	RoutineHistory(ctx context.Context, id string, o ListOptions) (Page[RoutineEntry], error)
	// SettleRoutineRun records the outcome of a routine run once (later or
	// concurrent calls for the same run change nothing and return the entry
	// as recorded).
	// While the routine is enabled: completed resets its failure count,
	// failed increments it and, when it reaches max_failures (> 0), disables
	// the routine with s.DisableReason and marks the entry DisabledRoutine;
	// cancelled changes nothing. ErrNotFound when no entry has the run.
	SettleRoutineRun(ctx context.Context, s RoutineSettle) (RoutineEntry, error)
	// SetRoutineDelivery records what happened to a run's result delivery.
	SetRoutineDelivery(ctx context.Context, runID, delivery string) error
}
