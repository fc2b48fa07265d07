package conns_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/anthropic"
	"github.com/agentgate/agentgate/core/model/fakeanthropic"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
	"github.com/agentgate/agentgate/core/model/openai"
)

// Eight workers calling a model at once, twice: the second round finds the
// first round's eight connections idle and dials none (Go's default client
// kept two and dialled six again, each a TLS handshake on a real API).
func TestParallelCallsReuseTheirConnections(t *testing.T) {
	const calls = 8
	providers := []struct {
		name  string
		fake  http.Handler
		model func(baseURL string) (core.Model, error)
	}{
		{"openai", fakeopenai.New(), func(u string) (core.Model, error) {
			return openai.New(openai.Config{Model: "test-model", BaseURL: u + "/v1"})
		}},
		{"anthropic", fakeanthropic.New(), func(u string) (core.Model, error) {
			return anthropic.New(anthropic.Config{Model: "test-model", BaseURL: u})
		}},
	}
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			// Every request of a round waits for the round's others, so the
			// round holds eight connections at once.
			var round sync.WaitGroup
			var dialled atomic.Int64
			ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				round.Done()
				round.Wait()
				p.fake.ServeHTTP(w, r)
			}))
			ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					dialled.Add(1)
				}
			}
			ts.Start()
			defer ts.Close()
			m, err := p.model(ts.URL)
			if err != nil {
				t.Fatal(err)
			}
			req := core.ModelRequest{Messages: []core.Message{{Role: core.RoleUser, Content: "hello"}}}
			for r := 1; r <= 2; r++ {
				round.Add(calls)
				before := dialled.Load()
				var wg sync.WaitGroup
				for range calls {
					wg.Go(func() {
						if _, err := m.Generate(context.Background(), req, nil); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
				if r == 2 {
					if n := dialled.Load() - before; n != 0 {
						t.Errorf("the second round of %d parallel calls dialled %d new connections, want 0 (the first round's stay idle)", calls, n)
					}
				}
			}
		})
	}
}
