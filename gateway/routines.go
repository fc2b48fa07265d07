package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/core/routine"
)

// newRoutines builds the routine scheduler on store and syncs the config
// file's routines into it. The caller wires its OnFinish and Handlers into
// the engine, passes it to the API and runs Start.
// chatDeliver posts routine results to chat targets, by kind (nil: none);
// alone says no other process writes the store.
func newRoutines(ctx context.Context, cfg *config.Config, store interface {
	core.RoutineStore
	routine.RunReader
	routine.SessionReader
}, alone bool, clock core.Clock, log *slog.Logger, chatDeliver map[string]routine.ChatDeliverer) (*routine.Scheduler, error) {
	guard, err := cfg.Egress.Policy()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	rc := routine.Config{Store: store, Runs: store, Sessions: store, Chat: chatDeliver, Clock: clock, Logger: log,
		Agents: slices.Sorted(maps.Keys(cfg.Agents)), Egress: guard}
	if alone { // the embedded store: sleep until the next routine is due, look every 10s at least
		rc.Alone, rc.Interval = true, 10*time.Second
	}
	rt, err := routine.New(rc)
	if err != nil {
		return nil, err
	}
	if err := rt.Sync(ctx, cfg.RoutineDefs()); err != nil {
		return nil, err
	}
	if n := len(cfg.Routines); n > 0 {
		log.Info("routines synced", "routines", n)
	}
	return rt, nil
}
