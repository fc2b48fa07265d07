package pghub_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/hub/pghub"
)

func TestChangesReachTheOtherReplica(t *testing.T) {
	url := os.Getenv("AGENTGATE_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("AGENTGATE_TEST_DATABASE_URL is unset (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable); skipping the PostgreSQL hub test")
	}
	log := slog.New(slog.DiscardHandler)
	schema := "hub_" + core.NewID("t")[2:]
	a, b := &core.Hub{}, &core.Hub{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	for _, br := range []func(context.Context) error{pghub.Bridge(url, schema, a, log), pghub.Bridge(url, schema, b, log)} {
		go func() { _ = br(ctx); done <- struct{}{} }()
	}
	defer func() { // the bridges stop when their context ends
		cancel()
		<-done
		<-done
	}()
	updates, unsub := b.Subscribe("run_1")
	defer unsub()
	// LISTEN starts asynchronously: announce until b hears it.
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
