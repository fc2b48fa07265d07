package lease_test

import (
	"testing"

	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/core/lease/leasetest"
)

// TestLocal runs the conformance suite on the in-memory leases of the
// embedded store.
func TestLocal(t *testing.T) {
	leasetest.Run(t, func(t *testing.T, clock *leasetest.Clock) lease.Store {
		return &lease.Local{Now: clock.Now}
	})
}
