package postgres_test

import (
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/queue/queuetest"
	"github.com/agentgate/agentgate/store/postgres"
)

// A waiting Dequeue sleeps until the next job is due instead of polling
// (queuetest.RunWakesWhenDue), with the listener up.
func TestDequeueWakesWhenDue(t *testing.T) {
	url := testURL(t)
	db := openDB(t, url, newSchema(t, url), postgres.Options{PollInterval: time.Hour})
	queuetest.RunWakesWhenDue(t, db, func() {
		<-db.ListenerReady()
		time.Sleep(200 * time.Millisecond) // the waiting worker looks and goes to sleep
	})
}
