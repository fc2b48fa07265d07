package sqlite

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
// previous page.

const auditCols = `id, at, principal, route, action, target, outcome, detail`

func scanAudit(s scanner, extra ...any) (core.AuditEntry, error) {
	var e core.AuditEntry
	var at int64
	dest := append(extra, &e.ID, &at, &e.Principal, &e.Route, &e.Action, &e.Target, &e.Outcome, &e.Detail)
	if err := s.Scan(dest...); err != nil {
		return core.AuditEntry{}, err
	}
	e.At = nanos(at)
	return e, nil
}

// insertAuditTx appends e inside tx; an entry without a time gets at, one
// without an outcome core.AuditOK. e.ID is ignored (the table assigns it).
func insertAuditTx(ctx context.Context, tx *txn, e core.AuditEntry, at time.Time) error {
	if e.At.IsZero() {
		e.At = at
	}
	if e.Outcome == "" {
		e.Outcome = core.AuditOK
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit(at, principal, route, action, target, outcome, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, e.At.UnixNano(), e.Principal, e.Route, e.Action, e.Target, e.Outcome, e.Detail); err != nil {
		return fmt.Errorf("append audit %s of %s: %w", e.Action, e.Target, err)
	}
	return nil
}

// AppendAudit implements core.AuditLog; At defaults to the store's clock.
func (db *DB) AppendAudit(ctx context.Context, e core.AuditEntry) error {
	now := db.opts.Clock.Now()
	if err := db.tx(ctx, func(tx *txn) error { return insertAuditTx(ctx, tx, e, now) }); err != nil {
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
	// id first twice: list reads a leading cursor column, scanAudit the entry.
	q := `SELECT id, ` + auditCols + ` FROM audit WHERE id < ?`
	args := []any{before}
	for _, c := range []struct{ col, v string }{
		{"principal", f.Principal}, {"action", f.Action}, {"target", f.Target}, {"route", f.Route},
	} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ?`
			args = append(args, c.v)
		}
	}
	if !f.Since.IsZero() {
		q += ` AND at >= ?`
		args = append(args, f.Since.UnixNano())
	}
	q += ` ORDER BY id DESC LIMIT ?`
	p, err := list(ctx, db, f.ListOptions, q, args, scanAudit)
	if err != nil {
		return core.Page[core.AuditEntry]{}, fmt.Errorf("list audit: %w", err)
	}
	return p, nil
}
