// Package bench is the benchmark harness behind `agentgate bench`: it
// starts real `agentgate serve` processes against an in-process fake OpenAI
// model and a fake tool endpoint, drives them over HTTP and reports
// throughput, latencies, journal cost and memory; `agentgate bench
// slack-ingest` drives signed Slack Events API requests at one server
// instead (slackingest.go).
package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver: checkpoint the embedded store before measuring its size

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/model/fakeopenai"
)

const benchHelp = `Usage: agentgate bench [flags]
       agentgate bench slack-ingest [flags]   (Slack Events API ingestion; see its --help)

Starts --replicas agentgate servers (this binary, or --server-bin) against a
built-in fake OpenAI model with no delay and a fake tool endpoint, drives them
over the REST API and prints:
  - completed runs per second and request-to-completion p50/p99
    (--runs single-turn runs, each in a new session, from --concurrency clients,
    after a warm-up of --concurrency runs that is not counted);
  - approval decision-to-tool-call p50/p99 (--approvals runs pause on a tool
    that needs approval; they are approved one at a time, each on another
    replica than the one that started the run);
  - journal bytes per turn for one session of each --turns size;
  - each server's idle RSS (1 s after it is ready) and peak RSS (at the end).
Requests are spread round-robin over the replicas. Progress goes to stderr,
the report to stdout.

Flags:
  --replicas N         servers to start (default 1; more than 1 needs
                       --database-url and --redis-url)
  --runs N             measured single-turn runs (default 500)
  --concurrency N      clients sending runs at once (default 16)
  --approvals N        runs paused on an approval (default 100)
  --turns LIST         session sizes for the journal cost (default 10,100,1000)
  --quick              smaller defaults for a smoke run: 50 runs, 10 approvals,
                       turns 10,100 (flags given explicitly still win)
  --markdown           also print a Markdown section for docs/benchmarks.md
  --database-url URL   AGENTGATE_DATABASE_URL for the servers (PostgreSQL)
  --redis-url URL      AGENTGATE_REDIS_URL for the servers (Redis Streams)
                       (point both at scratch instances: the bench's runs stay there)
  --workers N          server.workers in the servers' config (default: the
                       server's default)
  --server-bin PATH    the agentgate binary to run (default: this one)
  --model-delay D      the fake model waits D before each answer (e.g. 20ms),
                       to see the gateway's overhead over a model's own time
  --data-dir DIR       the embedded server's data dir (default: a new temp
                       dir); a dir kept from an earlier bench keeps its runs
  --retention-runs D   retention.runs D in the servers' config (every 1s):
                       runs finished more than D ago are pruned while the
                       bench runs; /metrics' agentgate_pruned_total is reported

The runs phase also reports the servers' CPU (user + system, /proc/PID/stat)
per completed run and, from their /metrics, the embedded store's commits and
write transactions per run, or the round trips to PostgreSQL and Redis.

The servers inherit AGENTGATE_SQLITE_SYNC; every other AGENTGATE_ variable, and
the OPENAI_ and SLACK_ ones, are removed from their environment.
`

// benchOptions are the bench's flags, resolved.
type benchOptions struct {
	replicas    int
	runs        int
	concurrency int
	approvals   int
	turns       []int
	quick       bool
	markdown    bool
	databaseURL string
	redisURL    string
	workers     int
	serverBin   string
	modelDelay  time.Duration
	dataDir     string
	retainRuns  time.Duration
	command     string   // the command line, for the report
	env         []string // more environment for the servers (KEY=value)
}

func (o benchOptions) embedded() bool { return o.databaseURL == "" }

// mode names the store and queue the servers use.
func (o benchOptions) mode() string {
	switch {
	case o.databaseURL == "" && o.redisURL == "":
		return "embedded"
	case o.redisURL == "":
		return "PostgreSQL + embedded queue"
	case o.databaseURL == "":
		return "SQLite + Redis"
	}
	return "PostgreSQL + Redis"
}

// benchTurnList is the --turns flag.
type benchTurnList []int

func (l *benchTurnList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *benchTurnList) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("want a comma-separated list of positive numbers, e.g. 10,100,1000, got %q", v)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

func parseBenchOptions(args []string, stderr io.Writer) (benchOptions, error) {
	o := benchOptions{turns: []int{10, 100, 1000}}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchHelp) }
	fs.IntVar(&o.replicas, "replicas", 1, "servers to start")
	fs.IntVar(&o.runs, "runs", 500, "measured runs")
	fs.IntVar(&o.concurrency, "concurrency", 16, "concurrent clients")
	fs.IntVar(&o.approvals, "approvals", 100, "approvals")
	fs.Var((*benchTurnList)(&o.turns), "turns", "session sizes")
	fs.BoolVar(&o.quick, "quick", false, "smoke run")
	fs.BoolVar(&o.markdown, "markdown", false, "print Markdown")
	fs.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL URL")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis URL")
	fs.IntVar(&o.workers, "workers", 0, "server.workers")
	fs.StringVar(&o.serverBin, "server-bin", "", "agentgate binary")
	fs.DurationVar(&o.modelDelay, "model-delay", 0, "fake model delay")
	fs.StringVar(&o.dataDir, "data-dir", "", "embedded data dir")
	fs.DurationVar(&o.retainRuns, "retention-runs", 0, "retention.runs")
	set, err := benchParseFlags(fs, args)
	if err != nil {
		return o, err
	}
	if o.quick {
		if !set["runs"] {
			o.runs = 50
		}
		if !set["approvals"] {
			o.approvals = 10
		}
		if !set["turns"] {
			o.turns = []int{10, 100}
		}
	}
	switch {
	case o.replicas < 1:
		return o, &UsageError{fmt.Sprintf("--replicas: must be at least 1, got %d", o.replicas)}
	case o.replicas > 1 && (o.databaseURL == "" || o.redisURL == ""):
		return o, &UsageError{fmt.Sprintf("--replicas %d: replicas share one PostgreSQL store and one Redis queue; "+
			"give both --database-url and --redis-url (the embedded SQLite store and queue serve one process)", o.replicas)}
	case o.runs < 0 || o.approvals < 0:
		return o, &UsageError{"--runs and --approvals: must not be negative"}
	case o.concurrency < 1:
		return o, &UsageError{fmt.Sprintf("--concurrency: must be at least 1, got %d", o.concurrency)}
	case o.modelDelay < 0:
		return o, &UsageError{fmt.Sprintf("--model-delay: must not be negative, got %s", o.modelDelay)}
	case o.dataDir != "" && (o.replicas > 1 || !o.embedded()):
		return o, &UsageError{"--data-dir: the embedded store of one server only (no --replicas, no --database-url)"}
	case o.retainRuns < 0:
		return o, &UsageError{fmt.Sprintf("--retention-runs: must not be negative, got %s", o.retainRuns)}
	case o.workers < 0:
		return o, &UsageError{fmt.Sprintf("--workers: must not be negative, got %d", o.workers)}
	}
	o.command = benchCommandLine(args)
	return o, nil
}

// benchParseFlags parses args with fs, which takes no arguments, and
// returns the flags given explicitly (they win over --quick's defaults).
func benchParseFlags(fs *flag.FlagSet, args []string) (set map[string]bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &UsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, &UsageError{fmt.Sprintf("%s takes no arguments, got %q", fs.Name(), fs.Args())}
	}
	set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set, nil
}

// benchCommandLine is the command as a user would type it again.
func benchCommandLine(args []string) string {
	parts := []string{"agentgate", "bench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`&|;<>()*?!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// UsageError is a mistake on the bench's command line; agentgate exits
// with code 2 on it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Main runs `agentgate bench ARGS…` (or `agentgate bench slack-ingest
// ARGS…` when args[0] is slack-ingest): it writes the report to stdout and
// progress and help to stderr. Flag mistakes are *UsageError; --help is not
// an error. The servers it starts are the agentgate binary running it, or
// --server-bin.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	run := runBench
	if len(args) > 0 && args[0] == "slack-ingest" {
		run, args = benchSlackIngest, args[1:]
	}
	err := run(ctx, args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil && ctx.Err() != nil {
		return errors.New("bench: interrupted; the servers were stopped")
	}
	return err
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseBenchOptions(args, stderr)
	if err != nil {
		return err // Main answers flag.ErrHelp with nil
	}
	var tmp string
	if o.serverBin, tmp, err = benchSetup(o.serverBin); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	model := fakeopenai.New()
	model.Script(func(req fakeopenai.Request) fakeopenai.Reply {
		time.Sleep(o.modelDelay)
		return benchScript(req)
	})
	modelURL := model.Start()
	defer model.Close()
	tools := newBenchTools()
	toolSrv := httptest.NewServer(tools)
	defer toolSrv.Close()

	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	progress("starting %d %s server(s) from %s", o.replicas, o.mode(), o.serverBin)
	cfg := benchConfig(modelURL, toolSrv.URL+"/deploy", o.workers)
	if o.retainRuns > 0 {
		cfg += fmt.Sprintf("retention: {runs: %s, every: 1s}\n", o.retainRuns)
	}
	reps, err := startBenchReplicas(ctx, o, cfg, tmp)
	defer stopBenchReplicas(reps)
	if err != nil {
		return err
	}
	// Let the servers settle, then take their idle RSS.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	rep := benchReport{opts: o, machine: benchMachineInfo(), date: time.Now()}
	for _, r := range reps {
		r.idleRSS, r.rssErr = benchProcStatus(r.cmd.Process.Pid, "VmRSS")
	}

	cl := newBenchClients(reps, o.concurrency)
	progress("warm-up: %d runs", o.concurrency)
	if _, err := benchRuns(ctx, cl, o.concurrency, o.concurrency); err != nil {
		return err
	}
	progress("runs: %d single-turn runs from %d clients", o.runs, o.concurrency)
	before := benchServerCounts(ctx, reps)
	if rep.runs, err = benchRuns(ctx, cl, o.runs, o.concurrency); err != nil {
		return err
	}
	rep.runCost = benchServerCounts(ctx, reps).minus(before)
	progress("approvals: %d runs paused on deploy", o.approvals)
	if rep.approvals, err = benchApprovals(ctx, cl, tools, o); err != nil {
		return err
	}
	for _, turns := range o.turns {
		progress("journal: a session of %d turns", turns)
		j, err := benchJournal(ctx, cl, reps[0], o, turns)
		if err != nil {
			return err
		}
		rep.journal = append(rep.journal, j)
	}
	for _, r := range reps {
		r.peakRSS, r.rssErr = r.peak()
	}
	rep.replicas = reps
	rep.toolCalls, rep.toolRepeats = tools.counts()

	rep.writeTable(stdout)
	if o.markdown {
		fmt.Fprintln(stdout)
		rep.writeMarkdown(stdout)
	}
	return nil
}

// benchSetup returns the agentgate binary the bench starts (the one given,
// or this one) and a new temp dir for the servers' config, data and logs,
// which the caller removes.
func benchSetup(serverBin string) (bin, tmp string, err error) {
	if bin = serverBin; bin == "" {
		if bin, err = os.Executable(); err != nil {
			return "", "", fmt.Errorf("bench: find this binary to start servers (give --server-bin): %w", err)
		}
		if b := filepath.Base(bin); strings.HasSuffix(b, ".test") || strings.HasSuffix(b, ".test.exe") {
			// A test binary would run its tests instead of `serve`.
			return "", "", &UsageError{fmt.Sprintf("bench: %s is a test binary, not agentgate; give --server-bin with the agentgate binary", b)}
		}
	}
	if tmp, err = os.MkdirTemp("", "agentgate-bench-"); err != nil {
		return "", "", fmt.Errorf("bench: temp dir: %w", err)
	}
	return bin, tmp, nil
}

// The fake model and tool.

// benchAnswer is the model's plain answer: 200 bytes of text.
var benchAnswer = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 5)[:200]

// benchInput is every plain run's and every turn's input: 200 bytes.
var benchInput = strings.Repeat("hello agentgate, tell me something. ", 6)[:200]

const benchDeployInput = "deploy web to staging"

// benchScript answers a tool result with text, "deploy …" with a call of the
// deploy tool, and anything else with benchAnswer.
func benchScript(req fakeopenai.Request) fakeopenai.Reply {
	if req.LastMessage().Role == "tool" {
		return fakeopenai.Reply{Text: "Deployed web to staging: " + req.LastMessage().Content}
	}
	if strings.HasPrefix(req.LastUserText(), "deploy") {
		return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "deploy", Arguments: `{"service":"web","env":"staging"}`}}}
	}
	return fakeopenai.Reply{Text: benchAnswer}
}

// benchConfig is the servers' config: agent bench on the fake model with a
// deploy tool that needs approval.
func benchConfig(modelURL, toolURL string, workers int) string {
	server := ""
	if workers > 0 {
		server = fmt.Sprintf("server:\n  workers: %d\n", workers)
	}
	return server + fmt.Sprintf(`agents:
  bench:
    description: agentgate bench
    model:
      provider: openai
      name: bench-model
      base_url: %q
      api_key: bench
    tools: [deploy]
tools:
  deploy:
    description: Deploy a service to an environment.
    http:
      url: %q
      timeout: 30s
    parameters:
      type: object
      properties:
        service: {type: string}
        env: {type: string, enum: [staging, production]}
      required: [service, env]
    approval:
      required: true
      timeout: 15m
`, modelURL, toolURL)
}

// benchTools is the fake tool endpoint: it answers {"ok":true} and tells
// waiters when a run's call arrived.
type benchTools struct {
	mu      sync.Mutex
	calls   int
	repeats int // calls with an Idempotency-Key seen before
	keys    map[string]bool
	waiters map[string]chan time.Time // by run id
}

func newBenchTools() *benchTools {
	return &benchTools{keys: map[string]bool{}, waiters: map[string]chan time.Time{}}
}

func (t *benchTools) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	runID, _, _ := strings.Cut(key, ":") // the key is run_id:tool_call_id
	t.mu.Lock()
	t.calls++
	if t.keys[key] {
		t.repeats++
	}
	t.keys[key] = true
	ch := t.waiters[runID]
	delete(t.waiters, runID)
	t.mu.Unlock()
	if ch != nil {
		ch <- at // buffered
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// expect returns a channel that gets the arrival time of run id's next call.
func (t *benchTools) expect(runID string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	t.mu.Lock()
	t.waiters[runID] = ch
	t.mu.Unlock()
	return ch
}

func (t *benchTools) forget(runID string) {
	t.mu.Lock()
	delete(t.waiters, runID)
	t.mu.Unlock()
}

func (t *benchTools) counts() (calls, repeats int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls, t.repeats
}

// Servers.

// benchReplica is one `agentgate serve` child process.
type benchReplica struct {
	index   int
	base    string
	dataDir string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // set before exited is closed

	idleRSS, peakRSS int64
	rssErr           error
}

// startBenchReplicas writes config to tmp and starts o.replicas servers on
// it, each with a data dir and a log in tmp, and waits until they are ready.
func startBenchReplicas(ctx context.Context, o benchOptions, config, tmp string) ([]*benchReplica, error) {
	cfgPath := filepath.Join(tmp, "agentgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("bench: write config: %w", err)
	}
	env := benchEnv(o)
	var reps []*benchReplica
	for i := range o.replicas {
		r := &benchReplica{
			index:   i,
			dataDir: cmp.Or(o.dataDir, filepath.Join(tmp, fmt.Sprintf("data-%d", i))),
			logPath: filepath.Join(tmp, fmt.Sprintf("server-%d.log", i)),
			exited:  make(chan struct{}),
		}
		addr, err := benchFreeAddr()
		if err != nil {
			return reps, err
		}
		r.base = "http://" + addr
		logf, err := os.Create(r.logPath)
		if err != nil {
			return reps, fmt.Errorf("bench: server log: %w", err)
		}
		r.cmd = exec.Command(o.serverBin, "serve", "--config", cfgPath, "--addr", addr, "--data-dir", r.dataDir)
		r.cmd.Env = append(env, fmt.Sprintf("AGENTGATE_NODE_ID=bench-%d", i))
		r.cmd.Stdout, r.cmd.Stderr = logf, logf
		if err := r.cmd.Start(); err != nil {
			logf.Close()
			return reps, fmt.Errorf("bench: start %s: %w (give the agentgate binary with --server-bin)", o.serverBin, err)
		}
		reps = append(reps, r)
		go func() {
			r.waitErr = r.cmd.Wait()
			logf.Close()
			close(r.exited)
		}()
	}
	for _, r := range reps {
		if err := r.waitReady(ctx); err != nil {
			return reps, err
		}
	}
	return reps, nil
}

// benchEnv is this process's environment without AGENTGATE_ settings (but
// AGENTGATE_SQLITE_SYNC), provider or Slack settings, plus o.env and the
// store and queue URLs.
func benchEnv(o benchOptions) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(k, "AGENTGATE_") && k != "AGENTGATE_SQLITE_SYNC") || strings.HasPrefix(k, "OPENAI_") ||
			strings.HasPrefix(k, "SLACK_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, o.env...)
	if o.databaseURL != "" {
		env = append(env, "AGENTGATE_DATABASE_URL="+o.databaseURL)
	}
	if o.redisURL != "" {
		env = append(env, "AGENTGATE_REDIS_URL="+o.redisURL)
	}
	return env
}

func benchFreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady polls GET /readyz until it answers 200.
func (r *benchReplica) waitReady(ctx context.Context) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		resp, err := hc.Get(r.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /readyz: %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.exited:
			return fmt.Errorf("bench: server %d exited before it was ready (%v):\n%s", r.index, r.waitErr, benchTail(r.logPath))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: server %d not ready after 60s (last: %v):\n%s", r.index, last, benchTail(r.logPath))
		}
	}
}

// stopBenchReplicas sends SIGTERM to every server, and SIGKILL to those still
// running 10 s later.
func stopBenchReplicas(reps []*benchReplica) {
	for _, r := range reps {
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			_ = r.cmd.Process.Kill()
		}
	}
	deadline := time.After(10 * time.Second)
	for _, r := range reps {
		select {
		case <-r.exited:
		case <-deadline:
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
}

// benchTail is the end of a server's log, for error messages.
func benchTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// peak returns the server's peak RSS so far, or why there is none (it
// exited during the bench).
func (r *benchReplica) peak() (int64, error) {
	select {
	case <-r.exited:
		return 0, fmt.Errorf("the server exited during the bench: %v (log: %s)", r.waitErr, benchTail(r.logPath))
	default:
	}
	return benchProcStatus(r.cmd.Process.Pid, "VmHWM")
}

// benchProcStatus reads a size field (VmRSS, VmHWM) of /proc/PID/status in bytes.
func benchProcStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of pid %d (needs Linux /proc): %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, field, err)
		}
		return n << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// Clients.

// benchClients send requests round-robin over the replicas.
type benchClients struct {
	all  []*client
	next atomic.Uint64
}

func newBenchClients(reps []*benchReplica, concurrency int) *benchClients {
	hc := &http.Client{
		Timeout: 90 * time.Second, // more than the API's 60 s cap on ?wait=true
		Transport: &http.Transport{
			MaxIdleConnsPerHost: concurrency + 4, // keep every client's connection alive
			IdleConnTimeout:     90 * time.Second,
		},
	}
	cl := &benchClients{}
	for _, r := range reps {
		cl.all = append(cl.all, &client{base: r.base, http: hc})
	}
	return cl
}

// pick returns the next replica's client and its index.
func (cl *benchClients) pick() (*client, int) {
	i := int((cl.next.Add(1) - 1) % uint64(len(cl.all)))
	return cl.all[i], i
}

func (cl *benchClients) at(i int) *client { return cl.all[i%len(cl.all)] }

// submit starts a run of agent bench and waits until it settles.
func benchSubmit(ctx context.Context, c *client, input, session string) (apiRun, error) {
	var run apiRun
	body := map[string]string{"input": input, "user_id": "bench"}
	if session != "" {
		body["session_id"] = session
	}
	err := c.do(ctx, "POST", "/api/v1/agents/bench/runs?wait=true", body, &run)
	return run, err
}

// benchErrors counts errors and keeps the first few distinct messages.
type benchErrors struct {
	mu      sync.Mutex
	n       int
	samples []string
}

func (e *benchErrors) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if msg := err.Error(); len(e.samples) < 3 && !slices.Contains(e.samples, msg) {
		e.samples = append(e.samples, msg)
	}
}

// benchDrive calls fn(i) for i in [0, n) from conc goroutines and returns the
// wall time; it stops early when ctx ends.
func benchDrive(ctx context.Context, n, conc int, fn func(i int)) time.Duration {
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(conc, max(n, 1)) {
		wg.Go(func() {
			for i := range jobs {
				fn(i)
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return time.Since(start)
}

// benchCounts are totals over the servers: CPU used and store commits.
type benchCounts struct {
	cpu                 time.Duration
	commits, txs        int64
	pgTrips, redisTrips int64
	pruned              int64 // runs retention removed
}

func (c benchCounts) minus(o benchCounts) benchCounts {
	return benchCounts{cpu: c.cpu - o.cpu, commits: c.commits - o.commits, txs: c.txs - o.txs,
		pgTrips: c.pgTrips - o.pgTrips, redisTrips: c.redisTrips - o.redisTrips, pruned: c.pruned - o.pruned}
}

// benchServerCounts reads each server's CPU time (/proc/PID/stat, user +
// system) and its store commit counters (/metrics; absent for PostgreSQL).
func benchServerCounts(ctx context.Context, reps []*benchReplica) benchCounts {
	var c benchCounts
	for _, r := range reps {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid)); err == nil {
			// Fields after the command name (which may hold spaces): utime
			// and stime are the 12th and 13th, in clock ticks (100 a second).
			if i := bytes.LastIndexByte(b, ')'); i > 0 {
				f := strings.Fields(string(b[i+1:]))
				if len(f) > 12 {
					ut, _ := strconv.ParseInt(f[11], 10, 64)
					st, _ := strconv.ParseInt(f[12], 10, 64)
					c.cpu += time.Duration(ut+st) * 10 * time.Millisecond
				}
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.SplitSeq(string(body), "\n") {
			name, v, ok := strings.Cut(line, " ")
			n, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				continue
			}
			switch name {
			case "agentgate_store_commits_total":
				c.commits += int64(n)
			case "agentgate_store_write_transactions_total":
				c.txs += int64(n)
			case "agentgate_store_round_trips_total":
				c.pgTrips += int64(n)
			case "agentgate_redis_round_trips_total":
				c.redisTrips += int64(n)
			case `agentgate_pruned_total{what="runs"}`:
				c.pruned += int64(n)
			}
		}
	}
	return c
}

// Phases.

type benchRunsResult struct {
	requested, completed int
	errors               benchErrors
	elapsed              time.Duration
	p50, p99             time.Duration
}

func (r *benchRunsResult) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.completed) / r.elapsed.Seconds()
}

// benchRuns sends n single-turn runs, each in a new session, from conc
// clients and measures request to completion of the completed ones.
func benchRuns(ctx context.Context, cl *benchClients, n, conc int) (*benchRunsResult, error) {
	res := &benchRunsResult{requested: n}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	res.elapsed = benchDrive(ctx, n, conc, func(int) {
		c, _ := cl.pick()
		start := time.Now()
		run, err := benchSubmit(ctx, c, benchInput, "")
		d := time.Since(start)
		switch {
		case err != nil:
			res.errors.add(err)
		case run.Status != core.RunCompleted:
			res.errors.add(fmt.Errorf("run is %s, want completed (error %q)", run.Status, run.Error))
		default:
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.completed = len(lat)
	slices.Sort(lat)
	res.p50, res.p99 = benchPercentile(lat, 50), benchPercentile(lat, 99)
	return res, nil
}

type benchApprovalsResult struct {
	requested, paused, decided, toolCalled, completed int
	errors                                            benchErrors
	p50, p99                                          time.Duration
}

// benchApprovals pauses n runs on the deploy tool, then approves them one at
// a time on another replica than the one that started the run, and measures
// from just before each decision request to the tool call's arrival.
func benchApprovals(ctx context.Context, cl *benchClients, tools *benchTools, o benchOptions) (*benchApprovalsResult, error) {
	res := &benchApprovalsResult{requested: o.approvals}
	type pausedRun struct {
		runID, approvalID string
		replica           int
	}
	var mu sync.Mutex
	var paused []pausedRun
	benchDrive(ctx, o.approvals, o.concurrency, func(int) {
		c, i := cl.pick()
		run, err := benchSubmit(ctx, c, benchDeployInput, "")
		switch {
		case err != nil:
			res.errors.add(err)
		case run.Status != core.RunPaused || len(run.PendingApprovals) != 1:
			res.errors.add(fmt.Errorf("run is %s with %d pending approvals, want paused with 1 (error %q)",
				run.Status, len(run.PendingApprovals), run.Error))
		default:
			mu.Lock()
			paused = append(paused, pausedRun{runID: run.ID, approvalID: run.PendingApprovals[0].ID, replica: i})
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.paused = len(paused)

	lat := make([]time.Duration, 0, len(paused))
	var approved []pausedRun
	for _, p := range paused {
		arrived := tools.expect(p.runID)
		c := cl.at(p.replica + 1)
		start := time.Now()
		var a core.Approval
		err := c.do(ctx, "POST", "/api/v1/approvals/"+url.PathEscape(p.approvalID)+"/decision",
			map[string]string{"decision": "approve"}, &a)
		if err != nil {
			tools.forget(p.runID)
			res.errors.add(fmt.Errorf("decide: %w", err))
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			continue
		}
		res.decided++
		approved = append(approved, p)
		select {
		case at := <-arrived:
			res.toolCalled++
			lat = append(lat, at.Sub(start))
		case <-time.After(30 * time.Second):
			tools.forget(p.runID)
			res.errors.add(fmt.Errorf("run %s: no tool call within 30s of the approval", p.runID))
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	slices.Sort(lat)
	res.p50, res.p99 = benchPercentile(lat, 50), benchPercentile(lat, 99)

	// Every approved run must now finish with the model's answer.
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range approved {
		for {
			var run apiRun
			err := cl.at(p.replica).do(ctx, "GET", "/api/v1/runs/"+url.PathEscape(p.runID), nil, &run)
			if err == nil && run.Status == core.RunCompleted {
				res.completed++
				break
			}
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if err == nil && run.Status.Terminal() {
				res.errors.add(fmt.Errorf("approved run is %s, want completed (error %q)", run.Status, run.Error))
				break
			}
			if time.Now().After(deadline) {
				res.errors.add(fmt.Errorf("approved run %s not completed 30s after the approvals (last: %s, %v)", p.runID, run.Status, err))
				break
			}
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return res, nil
}

type benchJournalResult struct {
	turns        int
	journalBytes int64
	events       int
	diskBytes    int64 // growth of the data dir; -1 when not measured
	p50          time.Duration
}

// benchJournal runs one session of turns sequential turns and measures the
// journal it left: the size of every event's data, and (embedded store) the
// growth of the data dir after a WAL checkpoint.
func benchJournal(ctx context.Context, cl *benchClients, first *benchReplica, o benchOptions, turns int) (benchJournalResult, error) {
	res := benchJournalResult{turns: turns, diskBytes: -1}
	var before int64
	if o.embedded() {
		var err error
		if before, err = benchStoreSize(ctx, first.dataDir); err != nil {
			return res, err
		}
	}
	lat := make([]time.Duration, 0, turns)
	session := ""
	for i := range turns {
		c, _ := cl.pick()
		start := time.Now()
		run, err := benchSubmit(ctx, c, benchInput, session)
		if err != nil {
			return res, fmt.Errorf("bench: journal: turn %d of %d: %w", i+1, turns, err)
		}
		if run.Status != core.RunCompleted {
			return res, fmt.Errorf("bench: journal: turn %d of %d is %s, want completed (error %q)", i+1, turns, run.Status, run.Error)
		}
		lat = append(lat, time.Since(start))
		session = run.SessionID
	}
	slices.Sort(lat)
	res.p50 = benchPercentile(lat, 50)

	c, _ := cl.pick()
	var err error
	res.journalBytes, res.events, err = benchSessionJournal(ctx, c, session)
	if err != nil {
		return res, fmt.Errorf("bench: journal of session %s: %w", session, err)
	}
	if o.embedded() {
		after, err := benchStoreSize(ctx, first.dataDir)
		if err != nil {
			return res, err
		}
		res.diskBytes = after - before
	}
	return res, nil
}

// benchSessionJournal sums the data size of every event of every run of a
// session, paging through both lists.
func benchSessionJournal(ctx context.Context, c *client, session string) (bytes int64, events int, err error) {
	cursor := ""
	for {
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var runs core.Page[core.Run]
		if err := c.do(ctx, "GET", "/api/v1/sessions/"+url.PathEscape(session)+"/runs?"+q.Encode(), nil, &runs); err != nil {
			return 0, 0, err
		}
		for _, r := range runs.Items {
			var after int64
			for {
				var evs core.Page[core.Event]
				path := fmt.Sprintf("/api/v1/runs/%s/events?after=%d&limit=5000", url.PathEscape(r.ID), after)
				if err := c.do(ctx, "GET", path, nil, &evs); err != nil {
					return 0, 0, err
				}
				for _, ev := range evs.Items {
					bytes += int64(len(ev.Data))
					events++
					after = ev.Seq
				}
				if evs.NextCursor == "" || len(evs.Items) == 0 {
					break
				}
			}
		}
		if cursor = runs.NextCursor; cursor == "" {
			return bytes, events, nil
		}
	}
}

// benchStoreSize folds the embedded store's WAL into the database file and
// returns the size of the data dir (without SQLite's shared-memory index).
func benchStoreSize(ctx context.Context, dataDir string) (int64, error) {
	db, err := sql.Open("sqlite", filepath.Join(dataDir, "agentgate.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, fmt.Errorf("bench: open the store to checkpoint it: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return 0, fmt.Errorf("bench: checkpoint the store: %w", err)
	}
	var total int64
	err = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "-shm") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bench: size of %s: %w", dataDir, err)
	}
	return total, nil
}

// benchPercentile is the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted durations; 0 when there are none.
func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100 + 0.9999999)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Report.

type benchMachine struct {
	cores    int
	cpu      string
	memTotal int64 // bytes; 0 when unknown
	goVer    string
	osArch   string
}

func benchMachineInfo() benchMachine {
	m := benchMachine{cores: runtime.NumCPU(), cpu: "unknown CPU", goVer: runtime.Version(), osArch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
					m.memTotal = kb << 10
				}
				break
			}
		}
	}
	return m
}

func (m benchMachine) String() string {
	mem := "unknown memory"
	if m.memTotal > 0 {
		mem = fmt.Sprintf("%.1f GiB", float64(m.memTotal)/(1<<30))
	}
	return fmt.Sprintf("%d cores (%s), %s, %s, %s", m.cores, m.cpu, mem, m.osArch, m.goVer)
}

type benchReport struct {
	opts                   benchOptions
	machine                benchMachine
	date                   time.Time
	runs                   *benchRunsResult
	approvals              *benchApprovalsResult
	journal                []benchJournalResult
	runCost                benchCounts // the servers' work over the runs phase
	replicas               []*benchReplica
	toolCalls, toolRepeats int
}

func (r *benchReport) title() string {
	if r.opts.mode() == "embedded" {
		return "agentgate bench (embedded)"
	}
	return fmt.Sprintf("agentgate bench (%s, %d %s)", r.opts.mode(), r.opts.replicas, plural(r.opts.replicas, "replica", "replicas"))
}

// setupStore names the servers' store.
func (o benchOptions) setupStore() string {
	if o.databaseURL != "" {
		return "PostgreSQL"
	}
	return "SQLite (synchronous=" + strings.ToLower(cmp.Or(os.Getenv("AGENTGATE_SQLITE_SYNC"), "full")) + ")"
}

func (r *benchReport) setup() string {
	store := r.opts.setupStore()
	queue := "embedded queue"
	if r.opts.redisURL != "" {
		queue = "Redis Streams"
	}
	workers := "server.workers default"
	if r.opts.workers > 0 {
		workers = fmt.Sprintf("server.workers %d", r.opts.workers)
	}
	delay := "no delay"
	if r.opts.modelDelay > 0 {
		delay = r.opts.modelDelay.String() + " per answer"
	}
	return fmt.Sprintf("%s + %s, %d %s, %s; fake OpenAI model (%s) and fake tool endpoint in the bench process",
		store, queue, r.opts.replicas, plural(r.opts.replicas, "server", "servers"), workers, delay)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (r *benchReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%s — %s\n", r.title(), r.date.Format(time.DateOnly))
	fmt.Fprintf(w, "machine  %s\n", r.machine)
	fmt.Fprintf(w, "setup    %s\n", r.setup())
	fmt.Fprintf(w, "command  %s\n\n", r.opts.command)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ru := r.runs
	fmt.Fprintf(tw, "runs (%d single-turn runs, new session each, %d clients)\n", ru.requested, r.opts.concurrency)
	fmt.Fprintf(tw, "  completed\t%d of %d\t(%d errors)\n", ru.completed, ru.requested, ru.errors.n)
	fmt.Fprintf(tw, "  throughput\t%.1f runs/s\t(%s wall time)\n", ru.perSecond(), ru.elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "  request → completed\tp50 %s\tp99 %s\n", benchMs(ru.p50), benchMs(ru.p99))
	if r.opts.modelDelay > 0 {
		fmt.Fprintf(tw, "  over the model's %s\tp50 %s\n", r.opts.modelDelay, benchMs(ru.p50-r.opts.modelDelay))
	}
	if ru.completed > 0 {
		c := r.runCost
		fmt.Fprintf(tw, "  server CPU per run\t%s\n", benchMs(c.cpu/time.Duration(ru.completed)))
		if c.commits > 0 {
			fmt.Fprintf(tw, "  store commits per run\t%.2f\t(%.2f write transactions)\n",
				float64(c.commits)/float64(ru.completed), float64(c.txs)/float64(ru.completed))
		}
		if c.pgTrips > 0 || c.redisTrips > 0 {
			fmt.Fprintf(tw, "  round trips per run\tPostgreSQL %.1f\tRedis %.1f (with idle polls)\n",
				float64(c.pgTrips)/float64(ru.completed), float64(c.redisTrips)/float64(ru.completed))
		}
		if r.opts.retainRuns > 0 {
			fmt.Fprintf(tw, "  runs pruned meanwhile\t%d\t(retention.runs %s)\n", c.pruned, r.opts.retainRuns)
		}
	}
	writeBenchErrors(tw, &ru.errors)

	ap := r.approvals
	fmt.Fprintf(tw, "\napprovals (%d runs paused on deploy, approved one at a time)\n", ap.requested)
	fmt.Fprintf(tw, "  paused\t%d of %d\n", ap.paused, ap.requested)
	fmt.Fprintf(tw, "  approved\t%d, tool called %d, completed %d\t(%d errors)\n", ap.decided, ap.toolCalled, ap.completed, ap.errors.n)
	fmt.Fprintf(tw, "  decision → tool call\tp50 %s\tp99 %s\n", benchMs(ap.p50), benchMs(ap.p99))
	fmt.Fprintf(tw, "  tool calls in all\t%d\t(%d repeated an Idempotency-Key)\n", r.toolCalls, r.toolRepeats)
	writeBenchErrors(tw, &ap.errors)
	tw.Flush()

	fmt.Fprintln(w, "\njournal (one session per size, sequential turns of 200-byte messages and answers)")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  turns\tevents\tjournal B/turn\tdisk B/turn\tturn p50\t")
	for _, j := range r.journal {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", benchThousands(int64(j.turns)), benchThousands(int64(j.events)),
			benchThousands(j.journalBytes/int64(j.turns)), j.diskPerTurn(), benchMs(j.p50))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nserver memory")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  server\tidle RSS\tpeak RSS\t")
	for _, rp := range r.replicas {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t\n", rp.index, benchMiB(rp.idleRSS), benchMiB(rp.peakRSS))
	}
	tw.Flush()
	for _, rp := range r.replicas {
		if rp.rssErr != nil {
			fmt.Fprintf(w, "  server %d: %v\n", rp.index, rp.rssErr)
		}
	}
}

func writeBenchErrors(w io.Writer, e *benchErrors) {
	for _, s := range e.samples {
		fmt.Fprintf(w, "  error\t%s\n", s)
	}
}

func (j benchJournalResult) diskPerTurn() string {
	if j.diskBytes < 0 {
		return "n/a"
	}
	return benchThousands(j.diskBytes / int64(j.turns))
}

// writeMarkdown writes a section for docs/benchmarks.md.
func (r *benchReport) writeMarkdown(w io.Writer) {
	ru, ap := r.runs, r.approvals
	fmt.Fprintf(w, "## %s\n\n", r.title())
	fmt.Fprintf(w, "```sh\ngo build -o /tmp/agentgate ./cmd/agentgate\n/tmp/%s\n```\n\n", r.opts.command)
	fmt.Fprintf(w, "%s, %s. %s.\n\n", r.date.Format(time.DateOnly), r.machine, r.setup())
	fmt.Fprintln(w, "| measure | value |")
	fmt.Fprintln(w, "|---|---:|")
	fmt.Fprintf(w, "| completed single-turn runs/s (%d runs, new session each, %d clients) | %.0f |\n", ru.requested, r.opts.concurrency, ru.perSecond())
	fmt.Fprintf(w, "| request → completed, p50 / p99 | %s / %s |\n", benchMs(ru.p50), benchMs(ru.p99))
	fmt.Fprintf(w, "| runs not completed (errors) | %d of %d |\n", ru.requested-ru.completed, ru.requested)
	if ru.completed > 0 {
		fmt.Fprintf(w, "| server CPU per completed run | %s |\n", benchMs(r.runCost.cpu/time.Duration(ru.completed)))
		if r.runCost.commits > 0 {
			fmt.Fprintf(w, "| store commits (write transactions) per run | %.2f (%.2f) |\n",
				float64(r.runCost.commits)/float64(ru.completed), float64(r.runCost.txs)/float64(ru.completed))
		}
		if r.runCost.pgTrips > 0 || r.runCost.redisTrips > 0 {
			fmt.Fprintf(w, "| round trips per run: PostgreSQL / Redis | %.1f / %.1f |\n",
				float64(r.runCost.pgTrips)/float64(ru.completed), float64(r.runCost.redisTrips)/float64(ru.completed))
		}
	}
	if r.opts.modelDelay > 0 {
		fmt.Fprintf(w, "| request → completed over the model's %s, p50 | %s |\n", r.opts.modelDelay, benchMs(ru.p50-r.opts.modelDelay))
	}
	fmt.Fprintf(w, "| approval decision → tool call, p50 / p99 (%d approvals, one at a time) | %s / %s |\n", ap.decided, benchMs(ap.p50), benchMs(ap.p99))
	fmt.Fprintf(w, "| approved runs completed | %d of %d |\n", ap.completed, ap.requested)
	idle, peak := make([]string, len(r.replicas)), make([]string, len(r.replicas))
	for i, rp := range r.replicas {
		idle[i], peak[i] = benchMiB(rp.idleRSS), benchMiB(rp.peakRSS)
	}
	per := ""
	if len(r.replicas) > 1 {
		per = " (per server)"
	}
	fmt.Fprintf(w, "| idle RSS%s | %s |\n", per, strings.Join(idle, " / "))
	fmt.Fprintf(w, "| peak RSS%s | %s |\n\n", per, strings.Join(peak, " / "))

	fmt.Fprintln(w, "| turns | journal B/turn | disk B/turn | turn p50 |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|")
	for _, j := range r.journal {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", benchThousands(int64(j.turns)), benchThousands(j.journalBytes/int64(j.turns)), j.diskPerTurn(), benchMs(j.p50))
	}
}

func benchMs(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return fmt.Sprintf("%.2f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

func benchMiB(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// benchThousands formats n with thousands separators: 1,638.
func benchThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
