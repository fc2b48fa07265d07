package redishub_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/hub/redishub"
)

func TestChangesReachTheOtherReplica(t *testing.T) {
	url := os.Getenv("AGENTGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("AGENTGATE_TEST_REDIS_URL is unset (e.g. redis://127.0.0.1:6379/0); skipping the Redis hub test")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	prefix := core.NewID("test")
	a, b := &core.Hub{}, &core.Hub{}
	ca, cb := redis.NewClient(opt), redis.NewClient(opt)
	defer ca.Close()
	defer cb.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{}, 2)
	for _, br := range []func(context.Context) error{redishub.Bridge(ca, prefix, a, log), redishub.Bridge(cb, prefix, b, log)} {
		go func() { _ = br(ctx); done <- struct{}{} }()
	}
	defer func() { // the bridges stop when their context ends
		cancel()
		<-done
		<-done
	}()

	updates, unsub := b.Subscribe("run_1")
	defer unsub()
	// The subscription is asynchronous: announce until b hears it.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for heard := false; !heard; {
		a.Changed("run_1")
		select {
		case u := <-updates:
			heard = u.RunID == "run_1" && u.Changed
		case <-tick.C:
		case <-deadline:
			t.Fatal("replica b never heard about run_1")
		}
	}
}
