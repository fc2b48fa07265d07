// Package redishub carries run-change signals between replicas over Redis
// pub/sub, so a request waiting on one replica (?wait=true, SSE) hears at
// once about a run another replica advanced. Signals are hints: a lost one
// only delays the waiter until its next poll.
package redishub

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
)

// Channel is the pub/sub channel for queue prefix.
func Channel(prefix string) string { return "agentgate:{" + prefix + "}:runs" }

// Bridge connects hub to the other replicas: local changes are published on
// the channel, and changes published by others are delivered to local
// subscribers. It returns a function that runs the subscriber (and the
// publisher) until ctx ends. A message carries the signals that waited
// together (core.NextSignals), and the worker that announced a change does
// not wait for Redis.
func Bridge(client redis.UniversalClient, prefix string, hub *core.Hub, log *slog.Logger) func(ctx context.Context) error {
	ch := Channel(prefix)
	origin := core.NewID("node")
	out := hub.Outgoing()
	return func(ctx context.Context) error {
		go publish(ctx, client, ch, origin, out, log)
		for ctx.Err() == nil {
			sub := client.Subscribe(ctx, ch)
			stop := context.AfterFunc(ctx, func() { sub.Close() }) // ends the range below
			for msg := range sub.Channel() {
				hub.DeliverSignals(msg.Payload, origin)
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

// publish sends the hub's change signals until ctx ends.
func publish(ctx context.Context, client redis.UniversalClient, ch, origin string, out <-chan string, log *slog.Logger) {
	for {
		msg, ok := core.NextSignals(ctx, out, origin)
		if !ok {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := client.Publish(pctx, ch, msg).Err(); err != nil && ctx.Err() == nil {
			log.Debug("redishub: publish", "err", err)
		}
		cancel()
	}
}
