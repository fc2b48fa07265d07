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
// subscribers. It returns a function that runs the subscriber until ctx ends.
func Bridge(client redis.UniversalClient, prefix string, hub *core.Hub, log *slog.Logger) func(ctx context.Context) error {
	ch := Channel(prefix)
	origin := core.NewID("node")
	hub.Broadcast = func(runID string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := client.Publish(ctx, ch, origin+" "+runID).Err(); err != nil {
			log.Debug("redishub: publish", "err", err)
		}
	}
	return func(ctx context.Context) error {
		for ctx.Err() == nil {
			sub := client.Subscribe(ctx, ch)
			stop := context.AfterFunc(ctx, func() { sub.Close() }) // ends the range below
			for msg := range sub.Channel() {
				from, runID, ok := cut(msg.Payload)
				if ok && from != origin {
					hub.Deliver(runID)
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

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}
