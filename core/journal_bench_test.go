package core_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/store/sqlite"
)

// BenchmarkJournal runs sessions of 10, 100 and 1,000 turns of 200-byte
// messages through the real engine and SQLite store and reports, per turn:
// journal bytes (event payloads written), disk bytes (database growth after a
// WAL checkpoint), and the median latency (submit to completed) of the first
// and the last min(100, turns/2) turns.
// Bytes per turn must stay flat as sessions grow (O(N) sessions, not O(N²)).
//
//	go test ./core -run '^$' -bench Journal -benchtime 1x
func BenchmarkJournal(b *testing.B) {
	for _, turns := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			for b.Loop() {
				benchSession(b, turns)
			}
		})
	}
}

func benchSession(b *testing.B, turns int) {
	answer := strings.Repeat("a", 200)
	m := &scriptModel{Func: func(int, core.ModelRequest) (core.ModelResponse, error) {
		return core.ModelResponse{Text: answer}, nil
	}}
	h := newHarness(b, map[string]*core.Agent{"a": {Model: m}}, sqlite.Options{})
	ctx := context.Background()
	if err := h.db.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	before := fileSize(b, h.path)
	input := strings.Repeat("m", 200)
	lat := make([]time.Duration, turns)
	session := ""
	for i := range turns {
		start := time.Now()
		run, err := h.eng.Submit(ctx, core.SubmitRequest{AgentID: "a", SessionID: session, Input: input, UserID: "u"})
		if err != nil {
			b.Fatal(err)
		}
		session = run.SessionID
		h.waitStatus(run.ID, core.RunCompleted)
		lat[i] = time.Since(start)
	}
	if err := h.db.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	disk := fileSize(b, h.path) - before
	var journal int64
	page, err := h.db.ListRuns(ctx, core.RunFilter{SessionID: session, ListOptions: core.ListOptions{Limit: 500}})
	for err == nil {
		for _, r := range page.Items {
			for _, ev := range h.events(r.ID) {
				journal += int64(len(ev.Data))
			}
		}
		if page.NextCursor == "" {
			break
		}
		page, err = h.db.ListRuns(ctx, core.RunFilter{SessionID: session, ListOptions: core.ListOptions{Limit: 500, Cursor: page.NextCursor}})
	}
	if err != nil {
		b.Fatal(err)
	}
	n := max(1, min(100, turns/2))
	b.ReportMetric(float64(journal)/float64(turns), "journal-B/turn")
	b.ReportMetric(float64(disk)/float64(turns), "disk-B/turn")
	b.ReportMetric(float64(disk), "disk-B/session")
	b.ReportMetric(median(lat[:n]).Seconds()*1000, "first-p50-ms/turn")
	b.ReportMetric(median(lat[turns-n:]).Seconds()*1000, "last-p50-ms/turn")
}

func fileSize(b *testing.B, path string) int64 {
	var total int64
	for _, p := range []string{path, path + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			total += st.Size()
		}
	}
	return total
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
