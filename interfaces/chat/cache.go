package chat

import (
	"sync"
	"time"
)

// Cache keeps at most Max values, each until its time to live ends: what an
// adapter looked up on its platform (a user's name in a chat, a channel's
// parent). When full, expired values go first, then the one closest to
// expiring. It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	m   map[K]cached[V]
}

type cached[V any] struct {
	v     V
	until time.Time
}

// NewCache returns a cache of at most max values.
func NewCache[K comparable, V any](max int) *Cache[K, V] {
	return &Cache[K, V]{max: max, m: map[K]cached[V]{}}
}

// Get returns k's value unless it is missing or expired at now.
func (c *Cache[K, V]) Get(k K, now time.Time) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.until) {
		return v, false
	}
	return e.v, true
}

// Put keeps v for k until now+ttl.
func (c *Cache[K, V]) Put(k K, v V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		c.evict(now)
	}
	c.m[k] = cached[V]{v: v, until: now.Add(ttl)}
}

// Len is how many values the cache holds, expired ones included.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// evict drops the values expired at now, or else the one closest to
// expiring.
func (c *Cache[K, V]) evict(now time.Time) {
	var first K
	var firstUntil time.Time
	for k, e := range c.m {
		if !now.Before(e.until) {
			delete(c.m, k)
			continue
		}
		if firstUntil.IsZero() || e.until.Before(firstUntil) {
			first, firstUntil = k, e.until
		}
	}
	if len(c.m) >= c.max {
		delete(c.m, first)
	}
}
