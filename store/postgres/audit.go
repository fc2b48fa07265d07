package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/internal/sqlstore"
)

// This file implements core.AuditLog. The audit table is append-only; its
// lists run newest first and a cursor is the id of the last entry of the
// previous page. Entries are plain inserts: they take no row locks, so
// appending one inside a decision or cancel adds nothing to the lock order.

const auditCols = `id, at, principal, route, action, target, outcome, detail`

func scanAudit(s scanner, extra ...any) (core.AuditEntry, error) {
	var e core.AuditEntry
	dest := append(extra, &e.ID, &e.At, &e.Principal, &e.Route, &e.Action, &e.Target, &e.Outcome, &e.Detail)
	if err := s.Scan(dest...); err != nil {
		return core.AuditEntry{}, err
	}
	e.At = utc(e.At)
	return e, nil
}

// insertAuditTx queues the append of e inside tx; an entry without a time
// gets at, one without an outcome core.AuditOK. e.ID is ignored (the table
// assigns it).
func insertAuditTx(tx *txn, e core.AuditEntry, at time.Time) {
	if e.At.IsZero() {
		e.At = at
	}
	if e.Outcome == "" {
		e.Outcome = core.AuditOK
	}
	tx.Later(`INSERT INTO audit (at, principal, route, action, target, outcome, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, e.At, e.Principal, e.Route, e.Action, e.Target, e.Outcome, e.Detail).
		Wrap(fmt.Sprintf("append audit %s of %s", e.Action, e.Target))
}

// AppendAudit implements core.AuditLog; At defaults to the store's clock.
func (db *DB) AppendAudit(ctx context.Context, e core.AuditEntry) error {
	now := db.opts.Clock.Now()
	if err := db.tx(ctx, func(tx *txn) error { insertAuditTx(tx, e, now); return nil }); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// ListAudit implements core.AuditLog: newest (highest id) first.
func (db *DB) ListAudit(ctx context.Context, f core.AuditFilter) (core.Page[core.AuditEntry], error) {
	before := int64(math.MaxInt64)
	if f.Cursor != "" {
		n, err := sqlstore.ParseCursor(f.Cursor)
		if err != nil {
			return core.Page[core.AuditEntry]{}, fmt.Errorf("list audit: %w", err)
		}
		before = n
	}
	var a params
	// id first twice: list reads a leading cursor column, scanAudit the entry.
	q := `SELECT id, ` + auditCols + ` FROM audit WHERE id < ` + a.add(before)
	for _, c := range []struct{ col, v string }{
		{"principal", f.Principal}, {"action", f.Action}, {"target", f.Target}, {"route", f.Route},
	} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ` + a.add(c.v)
		}
	}
	if !f.Since.IsZero() {
		q += ` AND at >= ` + a.add(f.Since)
	}
	q += ` ORDER BY id DESC`
	p, err := list(ctx, db, f.ListOptions, q, a, scanAudit)
	if err != nil {
		return core.Page[core.AuditEntry]{}, fmt.Errorf("list audit: %w", err)
	}
	return p, nil
}
