// Package pghub carries run-change signals between replicas that share only
// PostgreSQL (no Redis), over LISTEN/NOTIFY, so a request waiting on one
// replica (?wait=true, SSE) hears at once about a run another replica
// advanced. Signals are hints: a lost one only delays the waiter until its
// next poll.
package pghub

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgate/agentgate/core"
)

// Channel is the notification channel for a schema's runs (a hash of the
// schema when its name would make the channel longer than PostgreSQL's 63
// bytes).
func Channel(schema string) string {
	ch := "agentgate_runs_" + schema
	if len(ch) > 63 {
		h := fnv.New64a()
		h.Write([]byte(schema))
		ch = fmt.Sprintf("agentgate_runs_%016x", h.Sum64())
	}
	return ch
}

// Bridge connects hub to the other replicas through the database at url:
// local changes are sent with pg_notify on a connection of their own, and
// changes other replicas send are delivered to local subscribers. It returns
// the function that listens until ctx ends.
func Bridge(url, schema string, hub *core.Hub, log *slog.Logger) func(ctx context.Context) error {
	ch := Channel(schema)
	origin := core.NewID("node")
	out := hub.Outgoing()
	return func(ctx context.Context) error {
		go notifier(ctx, url, ch, origin, out, log)
		for ctx.Err() == nil {
			if err := listen(ctx, url, ch, origin, hub); err != nil && ctx.Err() == nil {
				log.Debug("pghub: listen", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
		return nil
	}
}

func listen(ctx context.Context, url, ch, origin string, hub *core.Hub) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		hub.DeliverSignals(n.Payload, origin)
	}
}

// notifier sends the hub's change signals on one connection, those queued
// together in one notification (core.NextSignals), reconnecting as needed,
// until ctx ends.
func notifier(ctx context.Context, url, ch, origin string, out <-chan string, log *slog.Logger) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		msg, ok := core.NextSignals(ctx, out, origin)
		if !ok {
			return
		}
		if conn == nil {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				log.Debug("pghub: connect", "err", err)
				continue
			}
			conn = c
		}
		if _, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", ch, msg); err != nil {
			log.Debug("pghub: notify", "err", err)
			conn.Close(context.WithoutCancel(ctx))
			conn = nil
		}
	}
}
