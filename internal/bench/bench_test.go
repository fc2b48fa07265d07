package bench

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/test/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

func TestBenchPercentile(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of odd count", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"median of even count is the lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100 values", ms(hundred...), 99, 99 * time.Millisecond},
		{"p50 of 100 values", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 10 values is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p100 is the largest", ms(1, 2, 3), 100, 3 * time.Millisecond},
		{"tiny p is the smallest", ms(1, 2, 3), 0.1, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := benchPercentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("benchPercentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestBenchFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string // empty = valid
	}{
		{"replicas need PostgreSQL and Redis", []string{"--replicas", "2"}, "--database-url and --redis-url"},
		{"replicas need Redis too", []string{"--replicas", "2", "--database-url", "postgres://x/y"}, "--database-url and --redis-url"},
		{"bad turns", []string{"--turns", "10,x"}, "comma-separated list"},
		{"no arguments", []string{"now"}, "takes no arguments"},
		{"zero concurrency", []string{"--concurrency", "0"}, "--concurrency"},
		// Valid flags, but this is a test binary: bench must not start it as a server.
		{"no server binary in tests", []string{"--quick"}, "give --server-bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Main(t.Context(), tt.args, &bytes.Buffer{}, &bytes.Buffer{})
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("bench %q = %v, want a usage error mentioning %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

func TestBenchQuickFlags(t *testing.T) {
	t.Parallel()
	o, err := parseBenchOptions([]string{"--quick"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.runs != 50 || o.approvals != 10 || len(o.turns) != 2 || o.turns[0] != 10 || o.turns[1] != 100 {
		t.Errorf("--quick = %d runs, %d approvals, turns %v; want 50, 10, [10 100]", o.runs, o.approvals, o.turns)
	}

	// Flags given explicitly win over --quick.
	o, err = parseBenchOptions([]string{"--quick", "--runs", "7", "--turns", "3"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.runs != 7 || o.approvals != 10 || len(o.turns) != 1 || o.turns[0] != 3 {
		t.Errorf("--quick --runs 7 --turns 3 = %d runs, %d approvals, turns %v; want 7, 10, [3]", o.runs, o.approvals, o.turns)
	}
	if want := "agentgate bench --quick --runs 7 --turns 3"; o.command != want {
		t.Errorf("command = %q, want %q", o.command, want)
	}
}

// TestBenchQuick runs `agentgate bench --quick --markdown` end to end against
// the agentgate binary (built once by testbin). It checks that the report is
// complete, never its timings.
func TestBenchQuick(t *testing.T) {
	bin := testbin.Binary(t) // skips in -short mode
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := Main(t.Context(), []string{"--quick", "--markdown", "--server-bin", bin}, &stdout, &stderr)
	report := stdout.String()
	if err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), report)
	}
	t.Logf("report:\n%s", report)

	m := regexp.MustCompile(`completed\s+(\d+) of 50\s`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("report has no 'completed N of 50' line")
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("report shows no completed runs")
	}
	if !regexp.MustCompile(`approved\s+[1-9]\d*, tool called [1-9]`).MatchString(report) {
		t.Errorf("report shows no approved run reaching the tool")
	}
	for _, want := range []string{
		"agentgate bench (embedded)",
		"command  agentgate bench --quick --markdown --server-bin",
		"runs (50 single-turn runs",
		"request → completed",
		"decision → tool call",
		"journal B/turn",
		"idle RSS",
		"peak RSS",
		// the Markdown section
		"## agentgate bench (embedded)",
		"| completed single-turn runs/s",
		"| approval decision → tool call, p50 / p99",
		"| turns | journal B/turn | disk B/turn | turn p50 |",
		"| 10 | ",
		"| 100 | ",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
