package bench

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/interfaces/slack"
	"github.com/agentgate/agentgate/test/testbin"
)

func TestBenchSlackIngestFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no arguments", []string{"now"}, "takes no arguments"},
		{"zero clients", []string{"--clients", "0"}, "--clients"},
		{"zero duration", []string{"--duration", "0s"}, "--duration"},
		{"negative warm-up", []string{"--warmup", "-1s"}, "--warmup"},
		{"target without its process", []string{"--target", "127.0.0.1:3100"}, "--target-pid"},
		// Valid flags, but this is a test binary: bench must not start it as a server.
		{"no server binary in tests", []string{"--quick"}, "give --server-bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Main(t.Context(), append([]string{"slack-ingest"}, tt.args...), &bytes.Buffer{}, &bytes.Buffer{})
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("bench slack-ingest %q = %v, want a usage error mentioning %q", tt.args, err, tt.wantErr)
			}
		})
	}
	o, err := parseIngestOptions([]string{"--quick", "--clients", "4"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 2*time.Second || o.warmup != 500*time.Millisecond || o.clients != 4 {
		t.Errorf("--quick --clients 4 = %s, %s, %d clients; want 2s, 500ms, 4", o.duration, o.warmup, o.clients)
	}
	if want := "agentgate bench slack-ingest --quick --clients 4"; o.command != want {
		t.Errorf("command = %q, want %q", o.command, want)
	}
}

// TestBenchSlackIngest runs `agentgate bench slack-ingest` briefly against the
// real binary: events are acknowledged, each is in the inbox, the report is
// complete. It checks no timings.
func TestBenchSlackIngest(t *testing.T) {
	bin := testbin.Binary(t) // skips in -short mode
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := Main(t.Context(), []string{"slack-ingest", "--duration", "500ms", "--warmup", "100ms", "--clients", "4",
		"--markdown", "--server-bin", bin}, &stdout, &stderr)
	report := stdout.String()
	if err != nil {
		t.Fatalf("bench slack-ingest: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), report)
	}
	t.Logf("report:\n%s", report)
	m := regexp.MustCompile(`in the durable inbox\s+(\d+) of (\d+) acknowledged\s+\(0 missing\)`).FindStringSubmatch(report)
	if m == nil {
		t.Fatal("report has no 'in the durable inbox N of N acknowledged (0 missing)' line")
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 || m[1] != m[2] {
		t.Errorf("inbox holds %s of %s acknowledged events, want all of them, at least one", m[1], m[2])
	}
	for _, want := range []string{
		"agentgate bench slack-ingest",
		"acknowledgement latency",
		"server CPU per event",
		"turned into runs meanwhile",
		", 0 errors)",
		"## agentgate bench slack-ingest",
		"| acknowledged events/s",
		"| server CPU per event |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestBenchSlackIngestTS(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{0: "1700000000.000000", 5: "1700000000.000005", 1234567: "1700000001.234567"} {
		if got := string(appendTS(nil, n)); got != want {
			t.Errorf("appendTS(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestBenchSlackIngestTarget drives a server the bench did not start (as
// Bolt is driven): the events it acknowledges are counted, every request
// is signed with the bench's secret, and the report does not claim to have
// checked that server's storage.
func TestBenchSlackIngestTarget(t *testing.T) {
	t.Parallel()
	var verified, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := slack.Verify(ingestSecret, r.Header, body, time.Now()); err != nil || !strings.Contains(string(body), `"type":"app_mention"`) {
			refused.Add(1)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		verified.Add(1)
	}))
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	err := Main(t.Context(), []string{"slack-ingest", "--duration", "300ms", "--warmup", "100ms", "--clients", "2", "--markdown",
		"--target", strings.TrimPrefix(srv.URL, "http://"), "--target-pid", strconv.Itoa(os.Getpid())}, &stdout, &stderr)
	report := stdout.String()
	if err != nil {
		t.Fatalf("bench slack-ingest --target: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("report:\n%s", report)
	if verified.Load() == 0 || refused.Load() != 0 {
		t.Errorf("the target verified %d events and refused %d, want all verified", verified.Load(), refused.Load())
	}
	if !regexp.MustCompile(`acknowledged\s+[1-9][0-9,]* events/s`).MatchString(report) {
		t.Errorf("report without the acknowledged rate:\n%s", report)
	}
	for _, want := range []string{`in the durable inbox\s+not checked`, `\| acknowledged events in the durable inbox \| not checked`,
		`External server at 127\.0\.0\.1:\d+ \(pid ` + strconv.Itoa(os.Getpid()) + `\)`} {
		if !regexp.MustCompile(want).MatchString(report) {
			t.Errorf("report does not match %s:\n%s", want, report)
		}
	}
	for _, wrong := range []string{"0 of 0", "turned into runs", "fake Slack"} {
		if strings.Contains(report, wrong) {
			t.Errorf("report about a server the bench did not start says %q:\n%s", wrong, report)
		}
	}
}
