package fault

// The harness: the agentgate binary, replicas of it, a private redis-server,
// a TCP proxy in front of PostgreSQL, a scripted fake model, a recording tool
// endpoint, an auto-approver, and the audit every scenario ends with.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core/model/fakeopenai"
	"github.com/agentgate/agentgate/test/testbin"
)

// Timing of the cluster under test (AGENTGATE_CLAIM_TTL and
// AGENTGATE_JANITOR_INTERVAL). The defaults, 30s each, would make every
// takeover in this suite wait half a minute or more.
const (
	claimTTL        = "3s"
	janitorInterval = "2s"
	// drainTimeout is serve's fixed shutdown budget: 10s for in-flight steps,
	// then up to 5s to hand unfinished jobs back.
	drainTimeout = 15 * time.Second
)

// Polling bounds.
const (
	pollEvery    = 50 * time.Millisecond
	startTimeout = 60 * time.Second
	// settleTimeout bounds how long every accepted run may take to complete
	// after a fault; it covers claim expiry, a janitor pass, job retry
	// backoff and a loaded 2-core machine.
	settleTimeout = 90 * time.Second
)

func TestMain(m *testing.M) { testbin.Main(m) }

// databaseURL is the PostgreSQL database the suite creates schemas in, or
// it skips the test.
func databaseURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("AGENTGATE_TEST_DATABASE_URL")
	if u == "" {
		t.Skip("fault suite skipped: AGENTGATE_TEST_DATABASE_URL is not set; set it to a PostgreSQL database the " +
			"suite may create schemas in (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable); " +
			"redis-server must also be on PATH")
	}
	if testing.Short() {
		t.Skip("fault suite skipped in -short mode (runs several real agentgate processes)")
	}
	return u
}

// redisServerBin is the redis-server executable, or it skips the test.
func redisServerBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("fault suite skipped: redis-server is not on PATH (each scenario starts and restarts its own); " +
			"install Redis 6.2 or later")
	}
	return p
}

// eventually polls cond every pollEvery until it holds, failing the test
// with cond's last state after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		<-tick.C
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return s
	}
	return fmt.Sprintf("[… %d earlier lines]\n%s\n", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}

func cleanEnv(extra ...string) []string { return testbin.CleanEnv(extra...) }

// ---------------------------------------------------------------------------
// PostgreSQL: a schema per test and a proxy that can cut it off.

// newSchema returns a fresh schema name, dropped (with all it holds) when the
// test ends. The replicas create it when they migrate.
func newSchema(t *testing.T, adminURL string) string {
	t.Helper()
	name := "agt_fault_" + randomHex(6)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// pgProxy forwards TCP connections to PostgreSQL. Down closes every open
// connection and makes new ones fail at once (accepted and closed, as a
// refused connection would); Up forwards again.
type pgProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	cut   int // connections closed by Down
	shut  int // connections refused while down
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *pgProxy) Addr() string { return p.ln.Addr().String() }

func (p *pgProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.shut++
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *pgProxy) forward(c net.Conn) {
	defer p.drop(c)
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.drop(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
}

func (p *pgProxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Down cuts PostgreSQL off: open connections are closed, new ones refused.
func (p *pgProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
		p.cut++
	}
}

// Up lets connections through again.
func (p *pgProxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// stats reports connections cut by Down and refused while down.
func (p *pgProxy) stats() (cut, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut, p.shut
}

// replicaURL is url pointed at addr, with a small pool so that many
// replicas stay well inside max_connections.
func replicaURL(t *testing.T, admin, addr string) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("AGENTGATE_TEST_DATABASE_URL: %v", err)
	}
	u.Host = addr
	q := u.Query()
	q.Set("pool_max_conns", "4")
	q.Set("connect_timeout", "5")
	u.RawQuery = q.Encode()
	return u.String()
}

// ---------------------------------------------------------------------------
// Redis: a private redis-server per test.

type redisServer struct {
	t    *testing.T
	bin  string
	port int
	dir  string
	out  *testbin.Buffer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	r := &redisServer{t: t, bin: redisServerBin(t), port: freePort(t), dir: t.TempDir(), out: &testbin.Buffer{}}
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("redis-server output:\n%s", tail(r.out.String(), 40))
		}
	})
	r.start()
	return r
}

func (r *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *redisServer) URL() string  { return "redis://" + r.Addr() + "/0" }

// start runs redis-server, empty, and waits until it answers PING.
func (r *redisServer) start() {
	r.t.Helper()
	r.mu.Lock()
	r.starts++
	fmt.Fprintf(r.out, "----- start %d\n", r.starts)
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir)
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		r.t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(r.out, "----- exited: %v\n", err)
		close(exited)
	}()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer c.Close()
	eventually(r.t, startTimeout, "redis-server to answer PING on "+r.Addr(), func() (bool, string) {
		select {
		case <-exited:
			r.t.Fatalf("redis-server exited at start:\n%s", r.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := c.Ping(ctx).Err()
		return err == nil, fmt.Sprint(err)
	})
}

// kill stops redis-server with SIGKILL: everything it held is gone.
func (r *redisServer) kill() {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// restartEmpty kills redis-server and starts a fresh, empty one on the same port.
func (r *redisServer) restartEmpty() {
	r.t.Helper()
	r.kill()
	r.start()
}

// client is a client of this server, closed when the test ends.
func (r *redisServer) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	r.t.Cleanup(func() { c.Close() })
	return c
}

// ---------------------------------------------------------------------------
// The fake model: "deploy SVC to ENV" calls the deploy tool, anything else
// gets a text answer.

func deployArgs(input string) string {
	f := strings.Fields(input)
	return fmt.Sprintf(`{"service":%q,"env":%q}`, f[1], f[3])
}

func expectedOutput(input string) string {
	if strings.HasPrefix(input, "deploy ") {
		f := strings.Fields(input)
		return fmt.Sprintf("Deployed %s to %s.", f[1], f[3])
	}
	return "answer: " + input
}

func modelScript(req fakeopenai.Request) fakeopenai.Reply {
	user := req.LastUserText()
	if !strings.HasPrefix(user, "deploy ") {
		return fakeopenai.Reply{Text: expectedOutput(user)}
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			return fakeopenai.Reply{Text: expectedOutput(user)}
		}
	}
	return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "deploy", Arguments: deployArgs(user)}}}
}

// ---------------------------------------------------------------------------
// The tool endpoint: one URL per replica (/deploy/<replica>), so the test
// knows which replica executed each call.

// toolCall is one request the endpoint received.
type toolCall struct {
	Replica string
	Key     string // Idempotency-Key
	Body    string // canonical JSON (see canonical)
	Done    bool   // answered (not cut off by the client going away)
}

// canonical is JSON text with object keys sorted, so equal arguments
// compare equal whatever their key order.
func canonical(b []byte) (string, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", err
	}
	out, err := json.Marshal(v)
	return string(out), err
}

const toolResponse = `{"deployment":"dep-1","status":"deployed"}`

type toolServer struct {
	url string

	mu       sync.Mutex
	calls    []toolCall
	inflight map[string]int
	// delay is how long a call to replica's URL takes; hold, when it returns
	// true, keeps the call open until the client goes away or release.
	delay   func(replica string) time.Duration
	hold    func(replica string) bool
	release chan struct{}
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{inflight: map[string]int{}, release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(ts.serve))
	ts.url = srv.URL + "/deploy/"
	t.Cleanup(srv.Close)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(ts.release) }) }) // before srv.Close
	return ts
}

func (ts *toolServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	canon, err := canonical(body)
	if err != nil {
		http.Error(w, "body must be JSON", http.StatusBadRequest)
		return
	}
	replica := strings.TrimPrefix(r.URL.Path, "/deploy/")
	ts.mu.Lock()
	i := len(ts.calls)
	ts.calls = append(ts.calls, toolCall{Replica: replica, Key: r.Header.Get("Idempotency-Key"), Body: canon})
	ts.inflight[replica]++
	var d time.Duration
	if ts.delay != nil {
		d = ts.delay(replica)
	}
	hold := ts.hold != nil && ts.hold(replica)
	ts.mu.Unlock()
	defer func() {
		ts.mu.Lock()
		ts.inflight[replica]--
		ts.mu.Unlock()
	}()
	if hold {
		select {
		case <-r.Context().Done():
		case <-ts.release:
		}
		return
	}
	if d > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(d):
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := io.WriteString(w, toolResponse); err == nil {
		ts.mu.Lock()
		ts.calls[i].Done = true
		ts.mu.Unlock()
	}
}

func (ts *toolServer) configure(delay func(string) time.Duration, hold func(string) bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.delay, ts.hold = delay, hold
}

func (ts *toolServer) Calls() []toolCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.calls)
}

// InFlight is how many calls to replica's URL are open now.
func (ts *toolServer) InFlight(replica string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.inflight[replica]
}

// ---------------------------------------------------------------------------
// A cluster: PostgreSQL schema (behind the proxy), private Redis, model and
// tool servers, and agentgate replicas.

type cluster struct {
	t        *testing.T
	adminURL string
	schema   string
	proxy    *pgProxy
	redis    *redisServer
	prefix   string
	model    *fakeopenai.Server
	modelURL string
	tools    *toolServer
	hook     *webhook
	workers  int
	replicas []*replica
}

// clusterOptions shape a cluster.
type clusterOptions struct {
	replicas []string // replica names; each is also its node id's prefix
	workers  int      // server.workers per replica; 0 = the default (8)
}

func newCluster(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	admin := databaseURL(t)
	redisServerBin(t)
	bin := testbin.Binary(t)
	u, err := url.Parse(admin)
	if err != nil || u.Host == "" {
		t.Fatalf("AGENTGATE_TEST_DATABASE_URL %q: want a postgres://host:port/db URL", admin)
	}
	pgAddr := u.Host
	if u.Port() == "" {
		pgAddr = net.JoinHostPort(u.Hostname(), "5432")
	}
	c := &cluster{t: t, adminURL: admin, prefix: "fault", workers: o.workers}
	c.schema = newSchema(t, admin)
	c.proxy = startProxy(t, pgAddr)
	c.redis = startRedis(t)
	c.model = fakeopenai.New()
	c.model.Script(modelScript)
	c.modelURL = c.model.Start()
	t.Cleanup(c.model.Close)
	c.tools = newToolServer(t)
	c.hook = newWebhook(t)
	for _, n := range o.replicas {
		c.replicas = append(c.replicas, c.newReplica(bin, n))
	}
	t.Cleanup(func() {
		for _, r := range c.replicas {
			r.kill()
		}
		if t.Failed() {
			for _, r := range c.replicas {
				t.Logf("replica %s output:\n%s", r.name, tail(r.out.String(), 150))
			}
		}
	})
	// All start together: migrations run under a lock.
	var wg sync.WaitGroup
	errs := make([]error, len(c.replicas))
	for i, r := range c.replicas {
		wg.Go(func() { errs[i] = r.startErr() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) replica(name string) *replica {
	for _, r := range c.replicas {
		if r.name == name {
			return r
		}
	}
	c.t.Fatalf("no replica %s", name)
	return nil
}

// config is the agent "ops" with the deploy tool (approval required) at
// this replica's URL on the tool server.
func (c *cluster) config(replica string) string {
	server := ""
	if c.workers > 0 {
		server = fmt.Sprintf("server:\n  workers: %d\n", c.workers)
	}
	cfg := server + fmt.Sprintf(`agents:
  ops:
    instructions: Deploy when asked.
    model:
      provider: openai
      name: gpt-4o-mini
      base_url: ${OPENAI_BASE_URL}
      api_key: test
    tools: [deploy]
tools:
  deploy:
    description: Deploy a service to an environment.
    http:
      url: %s%s
      method: POST
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
routines:
  digest:
    agent: ops
    schedule: "@yearly"
    input: digest of the day
    deliver_to: webhook:%s
    enabled: false
`, c.tools.url, replica, c.hook.url)
	p := filepath.Join(c.t.TempDir(), "agentgate-"+replica+".yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// webhook receives routine results; while refusing it answers 503, so the
// delivery job waits in the queue for its next attempt.
type webhook struct {
	url string

	mu       sync.Mutex
	refusing bool
	keys     []string // Idempotency-Key of every request
	accepted []string // … of the requests answered 200
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		h.keys = append(h.keys, key)
		if h.refusing {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		h.accepted = append(h.accepted, key)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/digest"
	return h
}

func (h *webhook) refuse(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refusing = on
}

func (h *webhook) seen() (all, accepted []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.keys), slices.Clone(h.accepted)
}

// replica is one `agentgate serve` process of a cluster.
type replica struct {
	t    *testing.T
	name string
	proc *testbin.Process
	out  *testbin.Buffer

	mu      sync.Mutex
	stopped bool // killed or terminated by the test
}

func (c *cluster) newReplica(bin, name string) *replica {
	node := name + "-" + strings.TrimPrefix(c.schema, "agt_fault_")
	proc := testbin.New(c.t, testbin.Options{
		Bin:  bin,
		Args: []string{"--config", c.config(name), "--data-dir", c.t.TempDir()},
		Env: cleanEnv(
			"AGENTGATE_DATABASE_URL="+replicaURL(c.t, c.adminURL, c.proxy.Addr()),
			"AGENTGATE_DATABASE_SCHEMA="+c.schema,
			"AGENTGATE_REDIS_URL="+c.redis.URL(),
			"AGENTGATE_REDIS_PREFIX="+c.prefix,
			"AGENTGATE_NODE_ID="+node,
			"AGENTGATE_CLAIM_TTL="+claimTTL,
			"AGENTGATE_JANITOR_INTERVAL="+janitorInterval,
			"OPENAI_BASE_URL="+c.modelURL,
		),
		ReadyTimeout: startTimeout,
	})
	return &replica{t: c.t, name: name, proc: proc, out: proc.Out}
}

// startErr starts the process and waits until GET /readyz answers 200.
func (r *replica) startErr() error {
	if err := r.proc.Start(); err != nil {
		return fmt.Errorf("replica %s: %w", r.name, err)
	}
	r.mu.Lock()
	r.stopped = false
	r.mu.Unlock()
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (r *replica) kill() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.proc.Kill()
}

// terminate sends SIGTERM and waits up to limit for the exit; it returns the
// process's exit error (nil = exit 0) and how long it took.
func (r *replica) terminate(limit time.Duration) (error, time.Duration) {
	r.t.Helper()
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	err, took := r.proc.Terminate(limit)
	if errors.Is(err, testbin.ErrStillRunning) {
		r.t.Fatalf("replica %s still running %s after SIGTERM (its drain budget is %s); output with goroutines:\n%s",
			r.name, limit, drainTimeout, tail(r.out.String(), 400))
	}
	return err, took
}

func (r *replica) alive() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.stopped
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// try sends a JSON request to the replica and returns the status and body.
func (r *replica) try(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.proc.Base()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s%s: %w", method, r.name, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s%s: read body: %w", method, r.name, path, err)
	}
	return resp.StatusCode, b, nil
}

// json sends a request, checks the status and decodes the answer into out.
func (r *replica) json(method, path string, body any, want int, out any) {
	r.t.Helper()
	status, b, err := r.try(method, path, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if status != want {
		r.t.Fatalf("%s %s%s: status %d, want %d; body: %s", method, r.name, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			r.t.Fatalf("%s %s%s: decode %s: %v", method, r.name, path, b, err)
		}
	}
}

// The API's JSON as a client sees it.

type runJSON struct {
	ID               string         `json:"id"`
	Status           string         `json:"status"`
	Input            string         `json:"input"`
	Output           string         `json:"output"`
	Error            string         `json:"error"`
	PendingApprovals []approvalJSON `json:"pending_approvals"`
}

type approvalJSON struct {
	ID         string `json:"id"`
	RunID      string `json:"run_id"`
	ToolCallID string `json:"tool_call_id"`
	Status     string `json:"status"`
}

type pageJSON[T any] struct {
	Items []T `json:"items"`
}

type errorJSON struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type eventJSON struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// ---------------------------------------------------------------------------
// Load, approvals and the audit.

// accepted is a run the gateway accepted (202 or 200).
type accepted struct {
	ID    string
	Input string
	Via   string // replica whose API accepted it
}

func (a accepted) tool() bool { return strings.HasPrefix(a.Input, "deploy ") }

// ledger records the runs a scenario got accepted.
type ledger struct {
	mu   sync.Mutex
	runs []accepted
}

func (l *ledger) add(a accepted) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, a)
}

func (l *ledger) all() []accepted {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

// input is the i-th input of a scenario's load: even ones deploy (the tool,
// with approval), odd ones chat. Service names are unique per run, so a
// tool body identifies its approval.
func input(tag string, i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("deploy %s-%03d to staging", tag, i)
	}
	return fmt.Sprintf("chat %s-%03d", tag, i)
}

// submit posts input to r without waiting; a 202 or 200 is recorded as
// accepted. It returns the status and body.
func (l *ledger) submit(r *replica, in string) (int, []byte, error) {
	status, body, err := r.try("POST", "/api/v1/agents/ops/runs", map[string]string{"input": in})
	if err != nil {
		return 0, nil, err
	}
	if status == http.StatusAccepted || status == http.StatusOK {
		var run runJSON
		if err := json.Unmarshal(body, &run); err != nil || run.ID == "" {
			return status, body, fmt.Errorf("submit %q to %s: %d with undecodable body %s", in, r.name, status, body)
		}
		l.add(accepted{ID: run.ID, Input: in, Via: r.name})
	}
	return status, body, nil
}

// submitAll posts n inputs tagged tag, spread round-robin over via; every
// one must be accepted.
func (l *ledger) submitAll(t *testing.T, tag string, n int, via ...*replica) {
	t.Helper()
	for i := range n {
		r := via[i%len(via)]
		status, body, err := l.submit(r, input(tag, i))
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusAccepted {
			t.Fatalf("submit %q to %s: status %d, want 202: %s", input(tag, i), r.name, status, body)
		}
	}
}

// approver approves every pending approval it sees through the API of a
// live replica of via (nil = any replica), except those skip picks. Errors (a replica down, PostgreSQL down, a
// race with another decision) are retried on the next pass.
type approver struct {
	stop func()
	done chan struct{}

	mu       sync.Mutex
	approved map[string]string // approval id → replica that accepted the decision
	refused  int               // decisions answered with something other than 200/409
}

func (c *cluster) autoApprove(via []*replica, skip func(approvalJSON) bool) *approver {
	if via == nil {
		via = c.replicas
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &approver{done: make(chan struct{}), approved: map[string]string{}}
	a.stop = func() {
		cancel()
		<-a.done
	}
	c.t.Cleanup(a.stop)
	go func() {
		defer close(a.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var live []*replica
			for _, r := range via {
				if r.alive() {
					live = append(live, r)
				}
			}
			if len(live) == 0 {
				continue
			}
			r := live[n%len(live)]
			status, body, err := r.try("GET", "/api/v1/approvals?status=pending&limit=500", nil)
			if err != nil || status != http.StatusOK {
				continue
			}
			var page pageJSON[approvalJSON]
			if json.Unmarshal(body, &page) != nil {
				continue
			}
			for _, ap := range page.Items {
				if skip != nil && skip(ap) {
					continue
				}
				status, _, err := r.try("POST", "/api/v1/approvals/"+ap.ID+"/decision",
					map[string]string{"decision": "approve", "decided_by": "fault-test"})
				a.mu.Lock()
				switch {
				case err == nil && status == http.StatusOK:
					a.approved[ap.ID] = r.name
				case err == nil && status == http.StatusConflict:
				default:
					a.refused++
				}
				a.mu.Unlock()
			}
		}
	}()
	return a
}

func (a *approver) counts() (approved, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.approved), a.refused
}

// runStatus reads run id through any live replica.
func (c *cluster) runStatus(id string) (runJSON, error) {
	var last error
	for _, r := range c.replicas {
		if !r.alive() {
			continue
		}
		status, body, err := r.try("GET", "/api/v1/runs/"+id, nil)
		if err != nil {
			last = err
			continue
		}
		if status != http.StatusOK {
			last = fmt.Errorf("GET %s/api/v1/runs/%s: %d %s", r.name, id, status, body)
			continue
		}
		var run runJSON
		if err := json.Unmarshal(body, &run); err != nil {
			return run, err
		}
		return run, nil
	}
	return runJSON{}, fmt.Errorf("no live replica answered: %v", last)
}

// waitSettled polls until every run is terminal or timeout passes, and
// returns each run's last known state.
func (c *cluster) waitSettled(runs []accepted, timeout time.Duration) map[string]runJSON {
	state := map[string]runJSON{}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		open := 0
		for _, a := range runs {
			if terminal(state[a.ID].Status) {
				continue
			}
			if run, err := c.runStatus(a.ID); err == nil {
				state[a.ID] = run
			}
			if !terminal(state[a.ID].Status) {
				open++
			}
		}
		if open == 0 || time.Now().After(deadline) {
			return state
		}
		<-tick.C
	}
}

// tally is what a scenario reports.
type tally struct {
	Accepted    int
	Completed   int
	Lost        int // accepted but not completed (still active, or failed)
	Double      int // tool calls executed under two different idempotency keys
	ToolCalls   int // requests the tool endpoint received
	SameKey     int // of which repeats under the same key (allowed: at least once)
	JournalErrs int // completed runs whose journal is not exactly-once
}

// audit waits for every accepted run to settle, checks runs, journals and
// tool calls, logs the scenario's summary line and fails the test on any
// lost run, any double execution or any journal anomaly.
func (c *cluster) audit(scenario string, l *ledger, began time.Time) tally {
	t := c.t
	t.Helper()
	runs := l.all()
	state := c.waitSettled(runs, settleTimeout)
	var tl tally
	tl.Accepted = len(runs)
	byRun := map[string]accepted{}
	var lost []string
	for _, a := range runs {
		byRun[a.ID] = a
		run := state[a.ID]
		if run.Status == "completed" {
			tl.Completed++
			if run.Output != expectedOutput(a.Input) {
				t.Errorf("%s: run %s (%q) completed with output %q, want %q", scenario, a.ID, a.Input, run.Output, expectedOutput(a.Input))
			}
			continue
		}
		tl.Lost++
		lost = append(lost, fmt.Sprintf("%s (%q via %s): %s", a.ID, a.Input, a.Via, asJSON(run)))
	}

	// The journal of each completed run: one answer per step (no prompt
	// replay), one result per tool call, one completion.
	for _, a := range runs {
		if state[a.ID].Status != "completed" {
			continue
		}
		if msg := c.checkJournal(a); msg != "" {
			tl.JournalErrs++
			t.Errorf("%s: run %s (%q): journal: %s", scenario, a.ID, a.Input, msg)
		}
	}

	// Tool calls: per call id and per body (one body per approval), the
	// keys they ran under.
	calls := c.tools.Calls()
	tl.ToolCalls = len(calls)
	keysByCall := map[string]map[string]bool{}
	keysByBody := map[string]map[string]bool{}
	seen := map[string]bool{}
	for _, call := range calls {
		runID, callID, ok := strings.Cut(call.Key, ":")
		if !ok {
			t.Errorf("%s: tool call without a run_id:tool_call_id Idempotency-Key: %+v", scenario, call)
			continue
		}
		if _, known := byRun[runID]; !known {
			t.Errorf("%s: tool call for run %s, which the gateway never accepted: %+v", scenario, runID, call)
		}
		if seen[call.Key] {
			tl.SameKey++
		}
		seen[call.Key] = true
		add(keysByCall, callID, call.Key)
		add(keysByBody, call.Body, call.Key)
	}
	doubles := map[string]string{}
	for id, keys := range keysByCall {
		if len(keys) > 1 {
			doubles["call "+id] = strings.Join(sortedKeys(keys), ", ")
		}
	}
	for body, keys := range keysByBody {
		if len(keys) > 1 {
			doubles["body "+body] = strings.Join(sortedKeys(keys), ", ")
		}
	}
	tl.Double = len(keysByBody) - countSingle(keysByBody)
	if n := len(keysByCall) - countSingle(keysByCall); n > tl.Double {
		tl.Double = n
	}
	// Every completed deploy run ran its tool, and the result it journaled
	// came from a call the endpoint answered (one cut off by a crash or a
	// drain timeout must have been executed again).
	answered := map[string]bool{}
	for _, call := range calls {
		if call.Done {
			answered[call.Body] = true
		}
	}
	for _, a := range runs {
		if !a.tool() || state[a.ID].Status != "completed" {
			continue
		}
		args, _ := canonical([]byte(deployArgs(a.Input)))
		if _, ok := keysByBody[args]; !ok {
			t.Errorf("%s: run %s (%q) completed but its tool was never called", scenario, a.ID, a.Input)
		} else if !answered[args] {
			t.Errorf("%s: run %s (%q) completed but no call of its tool was answered", scenario, a.ID, a.Input)
		}
	}

	t.Logf("SUMMARY %s: accepted=%d completed=%d lost=%d double_executions=%d tool_requests=%d same_key_repeats=%d journal_anomalies=%d elapsed=%s",
		scenario, tl.Accepted, tl.Completed, tl.Lost, tl.Double, tl.ToolCalls, tl.SameKey, tl.JournalErrs,
		time.Since(began).Round(100*time.Millisecond))
	if tl.Lost > 0 {
		sort.Strings(lost)
		t.Errorf("%s: %d of %d accepted runs did not complete within %s:\n  %s", scenario, tl.Lost, tl.Accepted, settleTimeout,
			strings.Join(lost, "\n  "))
	}
	if len(doubles) > 0 {
		var lines []string
		for k, v := range doubles {
			lines = append(lines, k+" under keys "+v)
		}
		sort.Strings(lines)
		t.Errorf("%s: %d tool call(s) executed under two different idempotency keys:\n  %s", scenario, tl.Double,
			strings.Join(lines, "\n  "))
	}
	return tl
}

func add(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func countSingle(m map[string]map[string]bool) int {
	n := 0
	for _, v := range m {
		if len(v) == 1 {
			n++
		}
	}
	return n
}

// checkJournal returns what is wrong with a completed run's journal, or "".
func (c *cluster) checkJournal(a accepted) string {
	var page pageJSON[eventJSON]
	var last error
	for _, r := range c.replicas {
		if !r.alive() {
			continue
		}
		status, body, err := r.try("GET", "/api/v1/runs/"+a.ID+"/events?limit=5000", nil)
		if err == nil && status == http.StatusOK {
			last = json.Unmarshal(body, &page)
			break
		}
		last = fmt.Errorf("%d %s %v", status, body, err)
	}
	if last != nil || page.Items == nil {
		return fmt.Sprintf("cannot read it: %v", last)
	}
	count := map[string]int{}
	results := map[string]int{}
	var completions int
	for _, ev := range page.Items {
		count[ev.Type]++
		switch ev.Type {
		case "tool_result":
			var r struct {
				ToolCallID string `json:"tool_call_id"`
			}
			_ = json.Unmarshal(ev.Data, &r)
			results[r.ToolCallID]++
		case "status":
			var s struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(ev.Data, &s)
			if terminal(s.Status) {
				completions++
			}
		}
	}
	wantModel, wantTool := 1, 0
	if a.tool() {
		wantModel, wantTool = 2, 1
	}
	var bad []string
	if count["model_response"] != wantModel {
		bad = append(bad, fmt.Sprintf("%d model responses, want %d", count["model_response"], wantModel))
	}
	if count["tool_result"] != wantTool || count["approval_decided"] != wantTool || count["approval_requested"] != wantTool {
		bad = append(bad, fmt.Sprintf("%d tool results, %d approvals requested, %d decided; want %d each",
			count["tool_result"], count["approval_requested"], count["approval_decided"], wantTool))
	}
	for id, n := range results {
		if n != 1 {
			bad = append(bad, fmt.Sprintf("tool call %s has %d results", id, n))
		}
	}
	if completions != 1 {
		bad = append(bad, fmt.Sprintf("%d terminal status events, want 1", completions))
	}
	if len(bad) == 0 {
		return ""
	}
	var types []string
	for _, ev := range page.Items {
		types = append(types, ev.Type)
	}
	return strings.Join(bad, "; ") + " (journal: " + strings.Join(types, ", ") + ")"
}

// toolReplicas counts, per replica, the tool calls it executed.
func (c *cluster) toolReplicas() map[string]int {
	out := map[string]int{}
	for _, call := range c.tools.Calls() {
		out[call.Replica]++
	}
	return out
}
