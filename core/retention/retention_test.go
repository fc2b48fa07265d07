package retention

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// fakeStore holds items of each kind by age and removes them as a store
// would: oldest first, at most limit per call.
type fakeStore struct {
	items map[core.Prunable][]time.Time // sorted, oldest first
	calls []string
	fail  core.Prunable
}

func (s *fakeStore) Prune(_ context.Context, what core.Prunable, before time.Time, limit int) (int, error) {
	s.calls = append(s.calls, string(what))
	if what == s.fail {
		return 0, errors.New("disk full")
	}
	n := 0
	for n < limit && n < len(s.items[what]) && s.items[what][n].Before(before) {
		n++
	}
	s.items[what] = s.items[what][n:]
	return n, nil
}

func ages(hours ...int) []time.Time {
	var out []time.Time
	for _, h := range hours {
		out = append(out, now.Add(-time.Duration(h)*time.Hour))
	}
	return out
}

func TestSweepRemovesWhatIsDueInBatches(t *testing.T) {
	s := &fakeStore{items: map[core.Prunable][]time.Time{
		core.PruneRuns:  ages(50, 40, 30, 20, 10, 1),
		core.PruneInbox: ages(9, 8),
		core.PruneAudit: ages(1000), // kept forever: no age set
	}}
	pruned := map[core.Prunable]int{}
	var waits int
	p := New(Config{
		Keep:    map[core.Prunable]time.Duration{core.PruneRuns: 5 * time.Hour, core.PruneInbox: 24 * time.Hour},
		Targets: []core.Pruner{s}, Batch: 2, Clock: fixedClock(now),
		Pruned: func(what core.Prunable, n int) { pruned[what] += n },
	})
	p.wait = func(context.Context, time.Duration) bool { waits++; return true }
	got, err := p.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got[core.PruneRuns] != 5 || got[core.PruneInbox] != 0 || got[core.PruneAudit] != 0 {
		t.Errorf("Sweep removed %v, want 5 runs and nothing else", got)
	}
	if len(s.items[core.PruneRuns]) != 1 || len(s.items[core.PruneAudit]) != 1 || len(s.items[core.PruneInbox]) != 2 {
		t.Errorf("left %v", s.items)
	}
	// Batches of 2: 2, 2, then 1 (< a batch: nothing more due); a pause after each full one.
	if want := []string{"runs", "runs", "runs", "inbox"}; !slices.Equal(s.calls, want) {
		t.Errorf("calls %v, want %v", s.calls, want)
	}
	if waits != 2 {
		t.Errorf("paused %d times, want after each of the 2 full batches", waits)
	}
	if pruned[core.PruneRuns] != 5 {
		t.Errorf("Pruned told %v", pruned)
	}
}

func TestSweepGoesOnPastAFailingKind(t *testing.T) {
	s := &fakeStore{fail: core.PruneRuns, items: map[core.Prunable][]time.Time{core.PruneOutbox: ages(100)}}
	p := New(Config{
		Keep:    map[core.Prunable]time.Duration{core.PruneRuns: time.Hour, core.PruneOutbox: time.Hour},
		Targets: []core.Pruner{s}, Clock: fixedClock(now),
	})
	got, err := p.Sweep(t.Context())
	if err == nil {
		t.Error("Sweep hid the failure")
	}
	if got[core.PruneOutbox] != 1 {
		t.Errorf("a failing kind stopped the others: %v", got)
	}
}

func TestEveryTargetPrunes(t *testing.T) {
	store := &fakeStore{items: map[core.Prunable][]time.Time{core.PruneDeadJobs: ages(100)}}
	queue := &fakeStore{items: map[core.Prunable][]time.Time{core.PruneDeadJobs: ages(100, 90)}}
	p := New(Config{Keep: map[core.Prunable]time.Duration{core.PruneDeadJobs: time.Hour},
		Targets: []core.Pruner{store, queue}, Clock: fixedClock(now)})
	if got, err := p.Sweep(t.Context()); err != nil || got[core.PruneDeadJobs] != 3 {
		t.Errorf("Sweep = %v, %v; want the store's and the queue's dead letters (3)", got, err)
	}
}

func TestNothingToKeepNeverStarts(t *testing.T) {
	s := &fakeStore{items: map[core.Prunable][]time.Time{core.PruneRuns: ages(100)}}
	p := New(Config{Keep: map[core.Prunable]time.Duration{core.PruneRuns: 0}, Targets: []core.Pruner{s}})
	if p.Enabled() {
		t.Error("Enabled with every age 0")
	}
	if err := p.Start(t.Context()); err != nil || len(s.calls) != 0 {
		t.Errorf("Start = %v after %v calls; want nil and none", err, s.calls)
	}
}

func TestStartSweepsUntilCancelled(t *testing.T) {
	s := &fakeStore{items: map[core.Prunable][]time.Time{core.PruneRuns: ages(100)}}
	p := New(Config{Keep: map[core.Prunable]time.Duration{core.PruneRuns: time.Hour}, Targets: []core.Pruner{s},
		Clock: fixedClock(now), Every: time.Minute})
	sweeps := 0
	p.wait = func(_ context.Context, d time.Duration) bool {
		if d != time.Minute {
			t.Errorf("waited %s between sweeps, want Every", d)
		}
		sweeps++
		return sweeps < 3
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(s.calls) != 3 || len(s.items[core.PruneRuns]) != 0 {
		t.Errorf("calls %v, left %v; want 3 sweeps that removed the old run", s.calls, s.items)
	}
}
