package lease

import (
	"context"
	"sync"
	"time"
)

// Local keeps leases in memory, for a store that one process owns (the
// embedded store: the gateway locks its data directory), where a lease
// written to the database would be renewed by the only process that can
// hold it — a disk write every few seconds while the gateway is idle. The
// zero value is ready; Now defaults to time.Now.
type Local struct {
	Now func() time.Time

	mu     sync.Mutex
	leases map[string]localLease
}

type localLease struct {
	holder string
	until  time.Time
}

var _ Store = (*Local)(nil)

// AcquireLease implements Store: it takes name when it is free, expired or
// already held by holder, until ttl from now.
func (l *Local) AcquireLease(_ context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.leases[name]; ok && cur.holder != holder && now.Before(cur.until) {
		return false, nil
	}
	if l.leases == nil {
		l.leases = map[string]localLease{}
	}
	l.leases[name] = localLease{holder: holder, until: now.Add(ttl)}
	return true, nil
}

// ReleaseLease implements Store: it frees name if holder holds it.
func (l *Local) ReleaseLease(_ context.Context, name, holder string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.leases[name]; ok && cur.holder == holder {
		delete(l.leases, name)
	}
	return nil
}
