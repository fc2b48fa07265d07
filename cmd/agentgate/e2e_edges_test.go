package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/interfaces/slack/slacktest"
)

// rssMiB is the resident memory of process pid (Linux /proc).
func rssMiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb / 1024
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// 3,000 connections that send /slack/events headers (a fresh timestamp, a
// well-formed signature, a 1 MiB Content-Length) and then nothing: the
// gateway's memory stays small, it keeps answering, and it closes them.
func TestE2ESlowSlackConnectionsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	const conns = 3000
	fake := slacktest.New(t)
	tool := newToolServer(t)
	g := startSlackGateway(t, fake, tool.URL)
	addr := strings.TrimPrefix(g.base, "http://")
	head := fmt.Sprintf("POST /slack/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"X-Slack-Request-Timestamp: %d\r\nX-Slack-Signature: v0=%s\r\nContent-Length: %d\r\n\r\n",
		addr, time.Now().Unix(), strings.Repeat("ab", 32), 1<<20)

	open := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if _, err := c.Write([]byte(head)); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		open = append(open, c)
	}
	closed := make(chan error, conns)
	var wg sync.WaitGroup
	for _, c := range open {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
			r := bufio.NewReader(c)
			var err error
			for err == nil {
				_, err = r.ReadByte()
			}
			closed <- err
		})
	}

	pid := g.proc.Pid()
	if status, body := doHTTP(t, "GET", g.base+"/healthz", nil, nil); status != http.StatusOK {
		t.Errorf("/healthz with %d slow connections open: %d %s", conns, status, body)
	}
	rss := rssMiB(t, pid)
	t.Logf("gateway RSS with %d slow connections open: %d MiB", conns, rss)
	if rss >= 200 {
		t.Errorf("gateway RSS %d MiB with %d slow connections, want < 200", rss, conns)
	}

	wg.Wait() // every connection ended, or its 90s read deadline passed
	close(closed)
	var timedOut int
	for err := range closed {
		if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
			timedOut++
		}
	}
	if timedOut > 0 {
		t.Errorf("%d of %d slow connections were still open after 90s", timedOut, conns)
	}
	if status, _ := doHTTP(t, "GET", g.base+"/healthz", nil, nil); status != http.StatusOK {
		t.Errorf("/healthz after the slow connections: %d", status)
	}
}

// server.metrics_addr serves /metrics and /readyz without a key on their
// own address; the API address, which needs keys, no longer serves
// /metrics.
func TestE2EMetricsAddr(t *testing.T) {
	t.Parallel()
	const key = "e2e-metrics-key-0123456789"
	ops := freeAddr(t)
	cfg := writeFile(t, "agentgate.yaml", fmt.Sprintf(`
server:
  metrics_addr: %q
agents:
  demo: {model: {provider: demo}}
`, ops))
	g := startGateway(t, gatewayOptions{config: cfg, env: []string{"AGENTGATE_API_KEYS=" + key}})
	auth := http.Header{"Authorization": {"Bearer " + key}}
	if status, body := doHTTP(t, "GET", g.base+"/metrics", nil, auth); status != http.StatusNotFound {
		t.Errorf("/metrics on the API address with a key: %d %s, want 404 (it moved to metrics_addr)", status, body)
	}
	status, body := doHTTP(t, "GET", "http://"+ops+"/metrics", nil, nil)
	if status != http.StatusOK || !strings.Contains(string(body), "agentgate_runs{") {
		t.Errorf("/metrics on metrics_addr without a key: %d %.200s", status, body)
	}
	if status, body := doHTTP(t, "GET", "http://"+ops+"/readyz", nil, nil); status != http.StatusOK {
		t.Errorf("/readyz on metrics_addr: %d %s", status, body)
	}
	if status, _ := doHTTP(t, "GET", "http://"+ops+"/api/v1/agents", nil, auth); status != http.StatusNotFound {
		t.Errorf("the API on metrics_addr: %d, want 404", status)
	}
}
