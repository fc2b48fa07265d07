package retention

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
)

// fakeBlobs is a blob store that knows when each blob was last stored.
type fakeBlobs struct {
	stored map[string]time.Time
	lists  int
}

func (b *fakeBlobs) BlobsStoredBefore(_ context.Context, t time.Time) ([]string, error) {
	b.lists++
	var ids []string
	for id, at := range b.stored {
		if at.Before(t) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func (b *fakeBlobs) RemoveBlob(_ context.Context, id string, t time.Time) (bool, error) {
	at, ok := b.stored[id]
	if !ok || !at.Before(t) {
		return false, nil
	}
	delete(b.stored, id)
	return true, nil
}

// fakeJournal names blobs; it counts how often it was read.
type fakeJournal struct {
	refs  map[string]bool
	reads int
	err   error
}

func (j *fakeJournal) BlobRefs(context.Context) (map[string]bool, error) {
	j.reads++
	return j.refs, j.err
}

// A sweep removes the files no journal entry names once they are older
// than the age, a batch at a time; a file the journal names, or stored
// recently, stays; the journal is not read when no file is old enough.
func TestSweepRemovesFilesNothingNames(t *testing.T) {
	blobs := &fakeBlobs{stored: map[string]time.Time{
		"sha256-a-orphan": now.Add(-48 * time.Hour), "sha256-b-orphan": now.Add(-30 * time.Hour),
		"sha256-c-orphan": now.Add(-25 * time.Hour), "sha256-named": now.Add(-72 * time.Hour),
		"sha256-new": now.Add(-time.Hour), // its message may be on its way
	}}
	journal := &fakeJournal{refs: map[string]bool{"sha256-named": true}}
	store := &fakeStore{items: map[core.Prunable][]time.Time{}}
	pruned := map[core.Prunable]int{}
	p := New(Config{
		Keep:    map[core.Prunable]time.Duration{core.PruneBlobs: 24 * time.Hour},
		Targets: []core.Pruner{store, Blobs{Refs: journal, Store: blobs}}, Batch: 2, Clock: fixedClock(now),
		Pruned: func(what core.Prunable, n int) { pruned[what] += n },
	})
	p.wait = func(context.Context, time.Duration) bool { return true }
	removed, err := p.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	left := make([]string, 0, len(blobs.stored))
	for id := range blobs.stored {
		left = append(left, id)
	}
	slices.Sort(left)
	if removed[core.PruneBlobs] != 3 || pruned[core.PruneBlobs] != 3 || !slices.Equal(left, []string{"sha256-named", "sha256-new"}) {
		t.Fatalf("removed %v (reported %v), left %v; want the 3 old files nothing names gone", removed, pruned, left)
	}
	if !slices.Contains(store.calls, string(core.PruneBlobs)) {
		t.Errorf("the store was not asked about blobs (calls %v): a store keeping them would keep them forever", store.calls)
	}

	reads := journal.reads
	blobs.stored = map[string]time.Time{"sha256-new": now.Add(-time.Hour)}
	if _, err := p.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if journal.reads != reads {
		t.Errorf("the journal was read %d more times with no file old enough", journal.reads-reads)
	}

	blobs.stored = map[string]time.Time{"sha256-x": now.Add(-48 * time.Hour)}
	journal.err = errors.New("database is closed")
	if _, err := p.Sweep(t.Context()); err == nil {
		t.Error("a sweep whose journal read failed reported no error")
	}
	if _, ok := blobs.stored["sha256-x"]; !ok {
		t.Error("a file was removed although the journal could not be read")
	}
	if n, err := (Blobs{Refs: journal, Store: blobs}).Prune(t.Context(), core.PruneRuns, now, 10); n != 0 || err != nil {
		t.Errorf("Prune(runs) of the blob pruner = %d, %v; want 0, nil (not its kind)", n, err)
	}
}
