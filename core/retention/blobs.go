package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/core"
)

// Blobs is the core.Pruner of attachments (core.PruneBlobs): a blob last
// stored before the cutoff that no journal entry names is removed. The
// cutoff is what makes this safe: a file is stored before the message or
// tool result that names it is journaled, within seconds, and storing it
// again (the same bytes sent anew) makes it new, so a blob is only ever
// removed when nothing named it for the whole retention age.
type Blobs struct {
	Refs  core.BlobReferrer // the journal
	Store core.BlobRemover  // where the bytes are
}

var _ core.Pruner = Blobs{}

// Prune implements core.Pruner; kinds other than core.PruneBlobs are not
// its own. It reads the journal's references only when some blob is old
// enough, then removes at most limit of those no entry names.
func (b Blobs) Prune(ctx context.Context, what core.Prunable, before time.Time, limit int) (int, error) {
	if what != core.PruneBlobs {
		return 0, nil
	}
	if limit <= 0 {
		return 0, fmt.Errorf("prune blobs: limit must be positive, got %d", limit)
	}
	old, err := b.Store.BlobsStoredBefore(ctx, before)
	if err != nil || len(old) == 0 {
		return 0, err
	}
	refs, err := b.Refs.BlobRefs(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range old {
		if refs[id] {
			continue
		}
		removed, err := b.Store.RemoveBlob(ctx, id, before)
		if err != nil {
			return n, err
		}
		if removed {
			n++
		}
		if n == limit {
			break
		}
	}
	return n, nil
}
