package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// BenchmarkAppendInbox stores batches of inbox messages the size a group
// commit of 32 concurrent requests makes; ns/op is one batch.
func BenchmarkAppendInbox(b *testing.B) {
	payload := []byte(`{"event_id":"Ev0123456789","message":{"Platform":"slack","Workspace":"T0AGENTGATE","Channel":"C0123456789",` +
		`"Thread":"1700000000.000100","MessageID":"1700000000.000100","UserID":"U0123456789","UserName":"","Text":"what did the nightly report say?",` +
		`"Mentioned":true,"FromBot":false,"DirectMessage":false,"At":"2023-11-14T22:13:20.0001Z"}}`)
	for _, sync := range []string{"full", "normal"} {
		for _, size := range []int{1, 32} {
			b.Run(fmt.Sprintf("synchronous=%s/batch=%d", sync, size), func(b *testing.B) {
				db := openQueue(b, sqlite.Options{Synchronous: sync})
				msgs := make([]core.InboxMessage, size)
				n := 0
				for b.Loop() {
					for i := range msgs {
						n++
						msgs[i] = core.InboxMessage{Platform: "slack", Key: fmt.Sprintf("msg:C1:%d.000100", n), Payload: payload, ReceivedAt: time.Now()}
					}
					if _, err := db.AppendInbox(b.Context(), msgs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/message")
			})
		}
	}
}
