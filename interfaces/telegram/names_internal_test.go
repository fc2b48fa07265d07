package telegram

import (
	"testing"
	"time"
)

// The name cache keeps at most its bound: expired names go first, then the
// one closest to expiring.
func TestNameCacheBound(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	c := newNameCache(2)
	ana, stranger, bob, cleo := nameKey{1, 10}, nameKey{1, 11}, nameKey{1, 12}, nameKey{1, 13}
	c.put(ana, "@ana", now, nameTTL)
	c.put(stranger, "", now, noNameTTL)
	c.put(bob, "@bob", now, nameTTL) // full: the stranger (expiring first) goes
	for _, k := range []struct {
		key    nameKey
		cached bool
	}{{ana, true}, {stranger, false}, {bob, true}} {
		if _, cached := c.get(k.key, now); cached != k.cached {
			t.Errorf("after a third name: %v cached = %t, want %t", k.key, cached, k.cached)
		}
	}
	later := now.Add(2 * nameTTL)
	c.put(cleo, "Cleo", later, nameTTL) // both expired: both go
	if len(c.m) != 1 {
		t.Errorf("after expiry the cache holds %d names, want 1", len(c.m))
	}
	if name, cached := c.get(cleo, later); !cached || name != "Cleo" {
		t.Errorf("cleo = %q (cached %t), want Cleo", name, cached)
	}
}
