package slack_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/interfaces/chat"
	"github.com/agentgate/agentgate/interfaces/slack"
	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
	"github.com/agentgate/agentgate/store/sqlite"
)

// BenchmarkIngest measures Events API ingestion in process: 32 concurrent
// signed app_mention requests through ServeHTTP into the SQLite inbox
// (synchronous=full), with the inbox processor turning them into runs
// meanwhile (the engine does not run them). `agentgate bench slack-ingest`
// measures the same over HTTP against a real server.
func BenchmarkIngest(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	db, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "db.sqlite"), sqlite.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	eng, err := core.NewEngine(core.EngineConfig{Store: db, Queue: db, Logger: log,
		Agents: map[string]*core.Agent{"helper": {ID: "helper", Model: echoModel{"helper"}}}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := slack.NewHandler(slack.HandlerConfig{
		Threads:       chat.Threads{Sessions: db},
		Intake:        chat.Intake{Engine: eng, Logger: log, Inbox: db, DefaultAgent: "helper"},
		SigningSecret: secret,
		Parser:        slack.Parser{BotUserID: slacktest.DefaultUserID, BotID: slacktest.DefaultBotID},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = h.Start(ctx) })
	defer func() { cancel(); wg.Wait() }()

	var next atomic.Uint64
	cpu0 := cpuTime()
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			ts := fmt.Sprintf("%d.%06d", 1700000000+n/1000000, n%1000000)
			body := event(fmt.Sprintf("Ev%d", n), "app_mention", "C1", "U1", mention("what did the nightly report say?"), ts, "", "")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, slacktest.SignedRequest(secret, []byte(body), time.Now()))
			if rec.Code != http.StatusOK {
				b.Errorf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/event")
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
