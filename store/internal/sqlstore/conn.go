package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Conn is a database connection or transaction as the statements written
// once here see it. A statement uses ? placeholders, or ?N for argument N
// (not both in one statement); a driver numbers them as its database wants.
// A time.Time or *time.Time argument (nil: NULL) is stored as the driver
// stores times; a destination made with At or AtOpt reads either form back.
type Conn interface {
	// Exec runs a statement and returns the rows it changed.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	// Query runs q and calls row for each row it returns, in order; an
	// error from row stops it.
	Query(ctx context.Context, q string, args []any, row func(Row) error) error
}

// Row is one row of a Query.
type Row interface{ Scan(dest ...any) error }

// Dialect is what the statements written once need to know of a database.
type Dialect struct {
	// Seq is the column that numbers rows in creation order, a list's
	// cursor: rowid (SQLite), pk (PostgreSQL).
	Seq string
	// All is the LIMIT argument that means no limit: -1 (SQLite), nil
	// (PostgreSQL's LIMIT NULL).
	All any
	// ForUpdate ends a SELECT that holds the rows it reads until the
	// transaction ends ("" on SQLite, whose one writer holds everything);
	// ForNoKeyUpdate the same for a row whose key stays; SkipLocked the
	// same, skipping rows another transaction holds.
	ForUpdate, ForNoKeyUpdate, SkipLocked string
	// Unset is the literal of a claim time that is no claim: 0 (SQLite),
	// '-infinity' (PostgreSQL).
	Unset string
}

// Limit is n as a LIMIT argument, 0 (or less) meaning no limit.
func (d *Dialect) Limit(n int) any {
	if n <= 0 {
		return d.All
	}
	return n
}

// One runs q and scans its first row; core.ErrNotFound when there is none.
func One(ctx context.Context, c Conn, q string, args []any, scan func(Row) error) error {
	found := false
	err := c.Query(ctx, q, args, func(r Row) error {
		if found {
			return nil
		}
		found = true
		return scan(r)
	})
	if err == nil && !found {
		return core.ErrNotFound
	}
	return err
}

// Collect runs q and scans every row.
func Collect[T any](ctx context.Context, c Conn, q string, args []any, scan func(Row) (T, error)) ([]T, error) {
	var out []T
	err := c.Query(ctx, q, args, func(r Row) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	return out, err
}

// In is "(?, ?, …)" for vs, whose values it appends to args.
func In(args []any, vs []string) (string, []any) {
	for _, v := range vs {
		args = append(args, v)
	}
	return `(?` + strings.Repeat(", ?", len(vs)-1) + `)`, args
}

// At is a scan destination for a stored time: unix nanoseconds (SQLite) or
// a timestamp (PostgreSQL), read as UTC. NULL and an unset time (0,
// -infinity) leave the zero time.
func At(t *time.Time) sql.Scanner { return timeDest{t: t} }

// AtOpt is At for an optional time: NULL and an unset time are nil.
func AtOpt(t **time.Time) sql.Scanner { return timeDest{opt: t} }

type timeDest struct {
	t   *time.Time
	opt **time.Time
}

func (d timeDest) Scan(src any) error {
	var t time.Time
	switch v := src.(type) {
	case nil, string: // NULL, or PostgreSQL's ±infinity
	case int64:
		if v != 0 {
			t = time.Unix(0, v).UTC()
		}
	case time.Time:
		t = v.UTC()
	default:
		return fmt.Errorf("scan a time from %T", src)
	}
	if d.t != nil {
		*d.t = t
		return nil
	}
	*d.opt = nil
	if !t.IsZero() {
		*d.opt = &t
	}
	return nil
}

// Optional is t as an argument: nil (NULL) for the zero time.
func Optional(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
