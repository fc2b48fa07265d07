package postgres_test

import (
	"testing"

	"github.com/agentgate/agentgate/core/lease"
	"github.com/agentgate/agentgate/core/lease/leasetest"
	"github.com/agentgate/agentgate/store/postgres"
)

func TestLeases(t *testing.T) {
	url := testURL(t)
	leasetest.Run(t, func(t *testing.T, clock *leasetest.Clock) lease.Store {
		// MaxConns: the racing acquirers of the suite run on separate connections.
		return openDB(t, url, newSchema(t, url), postgres.Options{Clock: clock, MaxConns: 8})
	})
}
