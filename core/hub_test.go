package core_test

import (
	"testing"

	"github.com/agentgate/agentgate/core"
)

// A request that only waits for a run to settle subscribes to its changes:
// it gets every change signal and none of the streamed words, which a
// stream's subscriber of the same run still gets.
func TestSubscribeChangesSkipsDeltas(t *testing.T) {
	var hub core.Hub
	changes, stop := hub.SubscribeChanges("run_1")
	defer stop()
	all, stopAll := hub.Subscribe("run_1")
	defer stopAll()
	hub.Publish(core.Update{RunID: "run_1", Delta: "Hel"})
	hub.ChangedTo("run_1", core.RunRunning)
	hub.Publish(core.Update{RunID: "run_1", Delta: "lo"})
	hub.ChangedTo("run_1", core.RunCompleted)
	var got []core.Update
	for len(changes) > 0 {
		got = append(got, <-changes)
	}
	if len(got) != 2 || got[0].Status != core.RunRunning || got[1].Status != core.RunCompleted {
		t.Errorf("changes-only subscriber got %+v, want the two changes (running, completed) and no deltas", got)
	}
	if n := len(all); n != 4 {
		t.Errorf("the stream's subscriber got %d updates, want 4 (two words, two changes)", n)
	}
}
