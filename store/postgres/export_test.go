package postgres

import "context"

// ListenerReady returns a channel that is closed once the job listener's
// LISTEN has taken effect (after the first Dequeue started it), so a test
// can tell a wake-up by NOTIFY from the one the listener gives on connecting.
func (db *DB) ListenerReady() <-chan struct{} { return db.listenReady }

// Heard counts the job notifications that woke Dequeue: those sent on
// other handles' connections (the enqueue on this handle woke it already).
func (db *DB) Heard() int64 { return db.heard.Load() }

// JobKeyLock returns the advisory lock that Enqueue takes for a job key, so
// a test can hold it and stop a transaction at its enqueue.
func JobKeyLock(key string) (class, objid int32) { return lockClassJobKey, jobKeyHash(key) }

// NewConns counts the connections the pool has opened, so a test can tell
// a connection reused from one replaced.
func (db *DB) NewConns() int64 { return db.pool.Stat().NewConnsCount() }

// The statements whose plans TestLookupsUseTheirIndexes checks.
const (
	RunHistoryStmt     = runHistoryStmt
	SessionHistoryStmt = sessionHistoryStmt
	CancelPendingStmt  = cancelPendingStmt
	ResumeStmt         = resumeStmt
)

// Setting reads a setting of a connection the pool holds (with one
// connection: the one every call uses).
func (db *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := db.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}
