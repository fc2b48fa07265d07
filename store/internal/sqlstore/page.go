package sqlstore

import (
	"context"
	"strconv"

	"github.com/agentgate/agentgate/core"
)

// Params are a statement's arguments with ? placeholders (Args).
type Params []any

// Add implements Args.
func (p *Params) Add(v any) string { *p = append(*p, v); return "?" }

// In implements Args.
func (p *Params) In(col string, vs []string) string {
	in, args := In(*p, vs)
	*p = args
	return col + ` IN ` + in
}

// Page runs q, which selects a row number (a Dialect's Seq) and then an
// item's columns in that number's order, with a LIMIT of one more than o's
// page size, and builds the page: its cursor is the number of its last
// item.
func Page[T any](ctx context.Context, c Conn, o core.ListOptions, q string, args Params,
	scan func(r Row, extra ...any) (T, error)) (core.Page[T], error) {
	limit := PageLimit(o.Limit)
	page := core.Page[T]{Items: []T{}}
	var last int64
	q += ` LIMIT ` + args.Add(limit+1)
	err := c.Query(ctx, q, args, func(r Row) error {
		if len(page.Items) == limit {
			page.NextCursor = strconv.FormatInt(last, 10)
			return nil
		}
		item, err := scan(r, &last)
		page.Items = append(page.Items, item)
		return err
	})
	if err != nil {
		return core.Page[T]{}, err
	}
	return page, nil
}

// PageAfter pages through the rows of selectFrom (which selects the row
// number seq, then an item's columns) after o's cursor that match where's
// conditions.
func PageAfter[T any](ctx context.Context, c Conn, seq string, o core.ListOptions, selectFrom string,
	where func(Args) string, scan func(r Row, extra ...any) (T, error)) (core.Page[T], error) {
	after, err := ParseCursor(o.Cursor)
	if err != nil {
		return core.Page[T]{}, err
	}
	var a Params
	q := selectFrom + ` WHERE ` + seq + ` > ` + a.Add(after)
	q += where(&a) + ` ORDER BY ` + seq
	return Page(ctx, c, o, q, a, scan)
}
