// Package redishub carries run-change signals between replicas over Redis
// pub/sub, so a request waiting on one replica (?wait=true, SSE) hears at
// once about a run another replica advanced. Signals are hints: a lost one
// only delays the waiter until its next poll.
package redishub

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
)

// Channel is the pub/sub channel for queue prefix.
func Channel(prefix string) string { return "agentgate:{" + prefix + "}:runs" }

// maxBatch is the most change signals one message carries.
const maxBatch = 100

// Bridge connects hub to the other replicas: local changes are published on
// the channel, and changes published by others are delivered to local
// subscribers. It returns a function that runs the subscriber (and the
// publisher) until ctx ends.
//
// A message is the sender's origin and the ids of the runs that changed,
// separated by spaces: the signals that arrive while a PUBLISH is in flight
// go out together in the next, so a busy replica sends fewer messages than
// it has changes, and the worker that announced a change does not wait for
// Redis.
func Bridge(client redis.UniversalClient, prefix string, hub *core.Hub, log *slog.Logger) func(ctx context.Context) error {
	ch := Channel(prefix)
	origin := core.NewID("node")
	send := make(chan string, 1024)
	hub.Broadcast = func(runID string) {
		select {
		case send <- runID:
		default: // a hint; the waiter's poll covers a dropped one
		}
	}
	return func(ctx context.Context) error {
		go publish(ctx, client, ch, origin, send, log)
		for ctx.Err() == nil {
			sub := client.Subscribe(ctx, ch)
			stop := context.AfterFunc(ctx, func() { sub.Close() }) // ends the range below
			for msg := range sub.Channel() {
				from, ids, ok := strings.Cut(msg.Payload, " ")
				if !ok || from == origin {
					continue
				}
				for id := range strings.FieldsSeq(ids) {
					hub.Deliver(id)
				}
			}
			stop()
			sub.Close()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // Redis went away: subscribe again
			}
		}
		return nil
	}
}

// publish sends the queued change signals, those waiting together (up to
// maxBatch) in one message, until ctx ends.
func publish(ctx context.Context, client redis.UniversalClient, ch, origin string, send <-chan string, log *slog.Logger) {
	var msg strings.Builder
	for {
		msg.Reset()
		msg.WriteString(origin)
		select {
		case <-ctx.Done():
			return
		case id := <-send:
			msg.WriteString(" " + id)
		}
	more:
		for n := 1; n < maxBatch; n++ {
			select {
			case id := <-send:
				msg.WriteString(" " + id)
			default:
				break more
			}
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := client.Publish(pctx, ch, msg.String()).Err(); err != nil && ctx.Err() == nil {
			log.Debug("redishub: publish", "err", err)
		}
		cancel()
	}
}
