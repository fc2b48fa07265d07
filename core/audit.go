package core

import (
	"context"
	"time"
)

// Audit actions. Every decision, refusal, cancel, routine change or trigger
// and refused key is one append-only entry.
const (
	AuditApprove       = "approval.approve"
	AuditDeny          = "approval.deny"
	AuditRefused       = "approval.refused" // a decision the policy refused
	AuditCancel        = "run.cancel"
	AuditRoutineCreate = "routine.create"
	AuditRoutineUpdate = "routine.update"
	AuditRoutineDelete = "routine.delete"
	AuditRoutineEnable = "routine.enable"
	AuditRoutineOff    = "routine.disable"
	AuditTrigger       = "routine.trigger"
	AuditJobRetry      = "job.retry"    // a dead-lettered job sent again
	AuditKeyRefused    = "key.refused"  // a request with a missing or unknown API key
	AuditForbidden     = "role.refused" // a key whose role or agents do not allow the request
)

// Audit outcomes.
const (
	AuditOK     = "ok"
	AuditDenied = "refused"
)

// AuditEntry is one record of the audit log. Principal is who acted, from
// their credential (key:<name>, slack:<team>/<user>, …; "" when unknown, e.g.
// a refused key); Route is where (api, cli, mcp, slack, discord, telegram,
// timer); Target the approval, run or routine acted on.
type AuditEntry struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	Principal string    `json:"principal"`
	Route     string    `json:"route"`
	Action    string    `json:"action"`
	Target    string    `json:"target"`
	Outcome   string    `json:"outcome"`
	Detail    string    `json:"detail,omitempty"`
}

// AuditFilter selects audit entries; empty fields match everything. Pages
// run newest first (the cursor is the last entry's id).
type AuditFilter struct {
	Principal string
	Action    string
	Target    string
	Route     string
	Since     time.Time // At >= Since when set
	ListOptions
}

// AuditLog is the append-only audit log.
type AuditLog interface {
	// AppendAudit appends e (At defaults to now) and never changes an
	// earlier entry.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// ListAudit lists entries newest first.
	ListAudit(ctx context.Context, f AuditFilter) (Page[AuditEntry], error)
}
