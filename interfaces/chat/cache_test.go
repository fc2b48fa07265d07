package chat

import (
	"testing"
	"time"
)

// The cache keeps at most its bound: expired values go first, then the one
// closest to expiring.
func TestCacheBound(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	c := NewCache[int, string](2)
	c.Put(10, "@ana", now, time.Hour)
	c.Put(11, "", now, 5*time.Minute)
	c.Put(12, "@bob", now, time.Hour) // full: 11 (expiring first) goes
	for _, k := range []struct {
		key    int
		cached bool
	}{{10, true}, {11, false}, {12, true}} {
		if _, cached := c.Get(k.key, now); cached != k.cached {
			t.Errorf("after a third value: %v cached = %t, want %t", k.key, cached, k.cached)
		}
	}
	later := now.Add(2 * time.Hour)
	if _, cached := c.Get(10, later); cached {
		t.Error("a value past its time to live was returned")
	}
	c.Put(13, "Cleo", later, time.Hour) // both expired: both go
	if n := c.Len(); n != 1 {
		t.Errorf("after expiry the cache holds %d values, want 1", n)
	}
	if name, cached := c.Get(13, later); !cached || name != "Cleo" {
		t.Errorf("13 = %q (cached %t), want Cleo", name, cached)
	}
}
